// Package ociimage writes container images as OCI image layout archives, made on this machine,
// that containerd's `ctr -n k8s.io images import` accepts and names by their full reference:
// a test node has no registry to pull from, so every image a pod runs comes from here.
//
// An archive holds one uncompressed layer, so a layer's digest is its diff ID, and is
// deterministic: fixed times, sorted entries, canonical JSON. The same files and config give
// the same digests on every run with the same Go toolchain.
package ociimage

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"strings"
)

// Media types and annotations of the OCI image spec and of containerd.
const (
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar"

	// AnnotationRefName is the OCI reference name: the tag of the image ("1" of "terdut.test/pause:1").
	AnnotationRefName = "org.opencontainers.image.ref.name"
	// AnnotationImageName is the full name containerd gives the imported image.
	AnnotationImageName = "io.containerd.image.name"
)

// Config is what an image says about how its container runs. Empty fields are left out.
type Config struct {
	Entrypoint []string
	Cmd        []string
	Env        []string // "NAME=value"
	User       string   // "65532" or "65532:65532"
	WorkingDir string
	// ExposedPorts are "8080/tcp" or "53/udp".
	ExposedPorts []string
	Labels       map[string]string
	// Architecture is the GOARCH the image's programs are built for (empty: this machine's).
	Architecture string
}

// Descriptor points at one blob of the archive.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *Platform         `json:"platform,omitempty"`
}

// Platform is the system an image runs on.
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// Manifest is an OCI image manifest.
type Manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        Descriptor   `json:"config"`
	Layers        []Descriptor `json:"layers"`
}

// Index is an OCI image layout's index.json.
type Index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []Descriptor `json:"manifests"`
}

// Image is an OCI image config (the blob whose digest is an image's ID).
type Image struct {
	Architecture string      `json:"architecture"`
	OS           string      `json:"os"`
	Config       ImageConfig `json:"config"`
	RootFS       RootFS      `json:"rootfs"`
}

// ImageConfig is the part of an image config that says how its container runs.
type ImageConfig struct {
	User         string              `json:"User,omitempty"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
	Env          []string            `json:"Env,omitempty"`
	Entrypoint   []string            `json:"Entrypoint,omitempty"`
	Cmd          []string            `json:"Cmd,omitempty"`
	WorkingDir   string              `json:"WorkingDir,omitempty"`
	Labels       map[string]string   `json:"Labels,omitempty"`
}

// RootFS lists the diff IDs (uncompressed digests) of an image's layers.
type RootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

// Write writes the image ref, one layer of files and cfg, as an OCI image layout in a tar
// stream to w. ref is a full reference with a tag, "terdut.test/pause:3.10.2". It returns an
// error for a ref without a tag, for files the layer cannot hold (see Layer), and w's errors.
func Write(w io.Writer, ref string, files []File, cfg Config) error {
	tag, err := refTag(ref)
	if err != nil {
		return err
	}
	layer, err := Layer(files)
	if err != nil {
		return err
	}
	arch := cfg.Architecture
	if arch == "" {
		arch = runtime.GOARCH
	}
	layerDesc := describe(MediaTypeLayer, layer)
	config, err := json.Marshal(Image{
		Architecture: arch,
		OS:           "linux",
		Config:       imageConfigFrom(cfg),
		RootFS:       RootFS{Type: "layers", DiffIDs: []string{layerDesc.Digest}},
	})
	if err != nil {
		return err
	}
	configDesc := describe(MediaTypeConfig, config)
	manifest, err := json.Marshal(Manifest{
		SchemaVersion: 2,
		MediaType:     MediaTypeManifest,
		Config:        configDesc,
		Layers:        []Descriptor{layerDesc},
	})
	if err != nil {
		return err
	}
	manifestDesc := describe(MediaTypeManifest, manifest)
	manifestDesc.Annotations = map[string]string{AnnotationImageName: ref, AnnotationRefName: tag}
	manifestDesc.Platform = &Platform{Architecture: arch, OS: "linux"}
	index, err := json.Marshal(Index{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: []Descriptor{manifestDesc}})
	if err != nil {
		return err
	}
	blobs := map[string][]byte{layerDesc.Digest: layer, configDesc.Digest: config, manifestDesc.Digest: manifest}
	return writeLayout(w, index, blobs)
}

// writeLayout writes oci-layout, index.json and the blobs, sorted by digest, as a tar stream.
func writeLayout(w io.Writer, index []byte, blobs map[string][]byte) error {
	tw := tar.NewWriter(w)
	entries := []File{
		{Path: "blobs", Mode: dirMode},
		{Path: "blobs/sha256", Mode: dirMode},
		{Path: "index.json", Mode: 0o644, Data: index},
		{Path: "oci-layout", Mode: 0o644, Data: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
	}
	for digest, data := range blobs {
		entries = append(entries, File{Path: "blobs/sha256/" + strings.TrimPrefix(digest, "sha256:"), Mode: 0o644, Data: data})
	}
	sortFiles(entries)
	for _, f := range entries {
		if err := writeEntry(tw, f); err != nil {
			return err
		}
	}
	return tw.Close()
}

func describe(mediaType string, data []byte) Descriptor {
	return Descriptor{MediaType: mediaType, Digest: Digest(data), Size: int64(len(data))}
}

// Digest is data's OCI digest, "sha256:<hex>".
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func imageConfigFrom(cfg Config) ImageConfig {
	c := ImageConfig{
		User: cfg.User, Env: cfg.Env, Entrypoint: cfg.Entrypoint, Cmd: cfg.Cmd,
		WorkingDir: cfg.WorkingDir, Labels: cfg.Labels,
	}
	if len(cfg.ExposedPorts) > 0 {
		c.ExposedPorts = make(map[string]struct{}, len(cfg.ExposedPorts))
		for _, p := range cfg.ExposedPorts {
			c.ExposedPorts[p] = struct{}{}
		}
	}
	return c
}

// refTag returns the tag of a full reference "host/path:tag".
func refTag(ref string) (string, error) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i+1:], "/") || i == len(ref)-1 || !strings.Contains(ref[:i], "/") {
		return "", fmt.Errorf("ociimage: reference %q: want host/name:tag", ref)
	}
	if strings.Contains(ref, "@") || strings.ContainsAny(ref, " \t\n") {
		return "", fmt.Errorf("ociimage: reference %q: want host/name:tag without a digest or spaces", ref)
	}
	tag := ref[i+1:]
	if !tagPattern.MatchString(tag) {
		return "", fmt.Errorf("ociimage: reference %q: tag %q: want letters, digits, _ . - (at most 128)", ref, tag)
	}
	return tag, nil
}

// tagPattern is the OCI distribution spec's tag.
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

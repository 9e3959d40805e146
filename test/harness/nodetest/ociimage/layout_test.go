package ociimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// layout is what an archive holds, checked by MustReadLayout.
type layout struct {
	Index    Index
	Manifest Manifest
	Image    Image
	Layer    map[string]*tar.Header // by name
	Data     map[string][]byte      // layer file contents by name
}

// MustReadLayout reads an archive and checks that it is a whole OCI layout for ref: every
// blob named by its digest, every descriptor's digest and size those of its blob, the config's
// diff ID the layer's digest, every entry at the epoch.
func MustReadLayout(tb testing.TB, archive []byte, ref string) layout {
	tb.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(archive))
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			tb.Fatalf("archive: %v", err)
		}
		if !h.ModTime.Equal(epoch) {
			tb.Errorf("archive %s: time %v, want %v", h.Name, h.ModTime, epoch)
		}
		names = append(names, h.Name)
		data, _ := io.ReadAll(tr)
		files[h.Name] = data
	}
	wantNames := []string{"blobs/", "blobs/sha256/"}
	for name, data := range files {
		if hex, ok := strings.CutPrefix(name, "blobs/sha256/"); ok && hex != "" {
			if got := Digest(data); got != "sha256:"+hex {
				tb.Errorf("blob %s: content digest %s", name, got)
			}
			wantNames = append(wantNames, name)
		}
	}
	wantNames = append(wantNames, "index.json", "oci-layout")
	sortStrings(wantNames)
	if !reflect.DeepEqual(names, wantNames) {
		tb.Errorf("archive entries %q, want %q (sorted)", names, wantNames)
	}
	if got := string(files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		tb.Errorf("oci-layout %q", got)
	}
	var l layout
	blob := func(d Descriptor, mediaType string, v any) []byte {
		tb.Helper()
		if d.MediaType != mediaType {
			tb.Errorf("descriptor media type %q, want %q", d.MediaType, mediaType)
		}
		data, ok := files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
		if !ok {
			tb.Fatalf("descriptor %s: no blob", d.Digest)
		}
		if int64(len(data)) != d.Size {
			tb.Errorf("descriptor %s: size %d, blob has %d", d.Digest, d.Size, len(data))
		}
		if v != nil {
			if err := json.Unmarshal(data, v); err != nil {
				tb.Fatalf("blob %s: %v", d.Digest, err)
			}
		}
		return data
	}
	if err := json.Unmarshal(files["index.json"], &l.Index); err != nil {
		tb.Fatalf("index.json: %v", err)
	}
	if l.Index.SchemaVersion != 2 || l.Index.MediaType != MediaTypeIndex || len(l.Index.Manifests) != 1 {
		tb.Fatalf("index.json %+v: want schema 2, one manifest", l.Index)
	}
	m := l.Index.Manifests[0]
	if got, want := m.Annotations[AnnotationImageName], ref; got != want {
		tb.Errorf("%s: got %q, want %q", AnnotationImageName, got, want)
	}
	if got, want := m.Annotations[AnnotationRefName], ref[strings.LastIndex(ref, ":")+1:]; got != want {
		tb.Errorf("%s: got %q, want %q", AnnotationRefName, got, want)
	}
	blob(m, MediaTypeManifest, &l.Manifest)
	if l.Manifest.SchemaVersion != 2 || len(l.Manifest.Layers) != 1 {
		tb.Fatalf("manifest %+v: want schema 2, one layer", l.Manifest)
	}
	blob(l.Manifest.Config, MediaTypeConfig, &l.Image)
	layer := blob(l.Manifest.Layers[0], MediaTypeLayer, nil)
	if got, want := l.Image.RootFS.DiffIDs, []string{l.Manifest.Layers[0].Digest}; !reflect.DeepEqual(got, want) {
		tb.Errorf("diff IDs %q, want %q", got, want)
	}
	if m.Platform == nil || *m.Platform != (Platform{Architecture: l.Image.Architecture, OS: l.Image.OS}) || l.Image.OS != "linux" {
		tb.Errorf("platform %+v, image %s/%s", m.Platform, l.Image.OS, l.Image.Architecture)
	}
	l.Layer, l.Data = map[string]*tar.Header{}, map[string][]byte{}
	tr = tar.NewReader(bytes.NewReader(layer))
	prev := ""
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			tb.Fatalf("layer: %v", err)
		}
		if h.Name <= prev {
			tb.Errorf("layer entry %q after %q: not sorted", h.Name, prev)
		}
		if !h.ModTime.Equal(epoch) {
			tb.Errorf("layer %s: time %v, want %v", h.Name, h.ModTime, epoch)
		}
		prev = h.Name
		l.Layer[h.Name] = h
		l.Data[h.Name], _ = io.ReadAll(tr)
	}
	return l
}

func sortStrings(s []string) {
	files := make([]File, len(s))
	for i := range s {
		files[i].Path = s[i]
	}
	sortFiles(files)
	for i := range s {
		s[i] = files[i].Path
	}
}

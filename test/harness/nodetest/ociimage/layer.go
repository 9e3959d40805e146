package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
)

// File is one file or directory of a layer.
type File struct {
	// Path is where it lives in the image, "/etc/passwd" or "etc/passwd".
	Path string
	// Mode is the permission bits, with fs.ModeDir for a directory and fs.ModeSticky,
	// fs.ModeSetuid or fs.ModeSetgid where wanted. Other types are refused.
	Mode     fs.FileMode
	UID, GID int
	Data     []byte // a directory has none
}

const dirMode = fs.ModeDir | 0o755

// epoch is every entry's time, so that the same files give the same layer.
var epoch = time.Unix(0, 0).UTC()

// Layer returns files as an uncompressed layer tar: sorted by path, each missing parent
// directory added (root's, 0755), every time the epoch. It returns an error for a path
// that is empty, leaves the root ("..") or comes twice, for a file type other than a
// regular file or a directory, and for a directory with data.
func Layer(files []File) ([]byte, error) {
	byPath := make(map[string]File, len(files))
	for _, f := range files {
		p := path.Clean("/" + f.Path)
		if f.Path == "" || p == "/" || strings.Contains(f.Path, "..") {
			return nil, fmt.Errorf("ociimage: layer path %q: want a path below /", f.Path)
		}
		if _, dup := byPath[p]; dup {
			return nil, fmt.Errorf("ociimage: layer path %q comes twice", p)
		}
		if f.Mode.Type() != 0 && f.Mode.Type() != fs.ModeDir {
			return nil, fmt.Errorf("ociimage: layer path %q: mode %v: only files and directories", p, f.Mode)
		}
		if f.Mode.IsDir() && len(f.Data) > 0 {
			return nil, fmt.Errorf("ociimage: layer path %q: a directory with data", p)
		}
		f.Path = p[1:]
		byPath[p] = f
	}
	for p := range byPath {
		for dir := path.Dir(p); dir != "/"; dir = path.Dir(dir) {
			if parent, ok := byPath[dir]; ok {
				if !parent.Mode.IsDir() {
					return nil, fmt.Errorf("ociimage: layer path %q is a file and the parent of %q", dir, p)
				}
				continue
			}
			byPath[dir] = File{Path: dir[1:], Mode: dirMode}
		}
	}
	sorted := make([]File, 0, len(byPath))
	for _, f := range byPath {
		sorted = append(sorted, f)
	}
	sortFiles(sorted)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range sorted {
		if err := writeEntry(tw, f); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// sortFiles sorts by path; a directory comes before what it holds, as its path is a prefix.
func sortFiles(files []File) {
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
}

// writeEntry writes one file or directory with fixed times and no user or group names.
func writeEntry(tw *tar.Writer, f File) error {
	mode := int64(f.Mode.Perm())
	if f.Mode&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if f.Mode&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if f.Mode&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	h := &tar.Header{
		Name: f.Path, Mode: mode, Uid: f.UID, Gid: f.GID, ModTime: epoch,
		Typeflag: tar.TypeReg, Size: int64(len(f.Data)), Format: tar.FormatPAX,
	}
	if f.Mode.IsDir() {
		h.Name += "/"
		h.Typeflag, h.Size = tar.TypeDir, 0
	}
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("ociimage: %s: %w", f.Path, err)
	}
	_, err := tw.Write(f.Data)
	return err
}

package ociimage

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	files := []File{
		{Path: "/usr/local/bin/helper", Mode: 0o755, Data: []byte("#!program")},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0::/:/x\n")},
		{Path: "tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		{Path: "/data", Mode: fs.ModeDir | 0o700, UID: 65532, GID: 65533},
	}
	cfg := Config{
		Entrypoint: []string{"/usr/local/bin/helper"}, Cmd: []string{"-v"}, Env: []string{"A=1"},
		User: "65532:65532", WorkingDir: "/data", ExposedPorts: []string{"8080/tcp", "53/udp"},
		Labels: map[string]string{"b": "2", "a": "1"},
	}
	const ref = "terdut.test/helper:1"
	var first bytes.Buffer
	if err := Write(&first, ref, files, cfg); err != nil {
		t.Fatal(err)
	}

	t.Run("OK", func(t *testing.T) {
		l := MustReadLayout(t, first.Bytes(), ref)
		c := l.Image.Config
		if !reflect.DeepEqual(c.Entrypoint, cfg.Entrypoint) || !reflect.DeepEqual(c.Cmd, cfg.Cmd) ||
			!reflect.DeepEqual(c.Env, cfg.Env) || c.User != cfg.User || c.WorkingDir != cfg.WorkingDir ||
			!reflect.DeepEqual(c.Labels, cfg.Labels) || len(c.ExposedPorts) != 2 {
			t.Errorf("image config %+v, want %+v", c, cfg)
		}
		want := map[string]struct {
			typ      byte
			mode     int64
			uid, gid int
			data     string
		}{
			"data/":                {tar.TypeDir, 0o700, 65532, 65533, ""},
			"etc/":                 {tar.TypeDir, 0o755, 0, 0, ""},
			"etc/passwd":           {tar.TypeReg, 0o644, 0, 0, "root:x:0:0::/:/x\n"},
			"tmp/":                 {tar.TypeDir, 0o1777, 0, 0, ""},
			"usr/":                 {tar.TypeDir, 0o755, 0, 0, ""},
			"usr/local/":           {tar.TypeDir, 0o755, 0, 0, ""},
			"usr/local/bin/":       {tar.TypeDir, 0o755, 0, 0, ""},
			"usr/local/bin/helper": {tar.TypeReg, 0o755, 0, 0, "#!program"},
		}
		if len(l.Layer) != len(want) {
			t.Errorf("layer has %d entries, want %d", len(l.Layer), len(want))
		}
		for name, w := range want {
			h, ok := l.Layer[name]
			if !ok {
				t.Errorf("layer lacks %s", name)
				continue
			}
			if h.Typeflag != w.typ || h.Mode != w.mode || h.Uid != w.uid || h.Gid != w.gid || string(l.Data[name]) != w.data {
				t.Errorf("layer %s: got type %c mode %o %d:%d %q, want %c %o %d:%d %q",
					name, h.Typeflag, h.Mode, h.Uid, h.Gid, l.Data[name], w.typ, w.mode, w.uid, w.gid, w.data)
			}
		}
	})

	t.Run("Deterministic", func(t *testing.T) {
		reversed := make([]File, len(files))
		for i, f := range files {
			reversed[len(files)-1-i] = f
		}
		var again bytes.Buffer
		if err := Write(&again, ref, reversed, cfg); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first.Bytes(), again.Bytes()) {
			t.Errorf("the same files in another order gave another archive")
		}
		changed := append([]File(nil), files...)
		changed[0].Mode = 0o750
		var other bytes.Buffer
		if err := Write(&other, ref, changed, cfg); err != nil {
			t.Fatal(err)
		}
		a := MustReadLayout(t, first.Bytes(), ref)
		b := MustReadLayout(t, other.Bytes(), ref)
		if a.Index.Manifests[0].Digest == b.Index.Manifests[0].Digest {
			t.Errorf("a file's mode changed but the manifest digest stayed %s", a.Index.Manifests[0].Digest)
		}
	})

	t.Run("ErrBadInput", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			ref   string
			files []File
			want  string
		}{
			{"NoTag", "terdut.test/helper", files, "want host/name:tag"},
			{"NoHost", "helper:1", files, "want host/name:tag"},
			{"PortNoTag", "localhost:5000/helper", files, "want host/name:tag"},
			{"BadTag", "terdut.test/helper:.1", files, "tag \".1\""},
			{"Digest", "terdut.test/helper:1@sha256:00", files, "want host/name:tag"},
			{"Twice", ref, []File{{Path: "/a", Mode: 0o644}, {Path: "a", Mode: 0o644}}, "comes twice"},
			{"Escapes", ref, []File{{Path: "/../etc/x", Mode: 0o644}}, "below /"},
			{"Root", ref, []File{{Path: "/", Mode: dirMode}}, "below /"},
			{"Symlink", ref, []File{{Path: "/a", Mode: fs.ModeSymlink | 0o777}}, "only files and directories"},
			{"DirData", ref, []File{{Path: "/a", Mode: dirMode, Data: []byte("x")}}, "a directory with data"},
			{"FileParent", ref, []File{{Path: "/a", Mode: 0o644}, {Path: "/a/b", Mode: 0o644}}, "is a file and the parent"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var buf bytes.Buffer
				err := Write(&buf, tc.ref, tc.files, Config{})
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("got %v, want an error with %q", err, tc.want)
				}
				if buf.Len() != 0 {
					t.Errorf("wrote %d bytes for bad input", buf.Len())
				}
			})
		}
	})
}

func TestPauseAndBinary(t *testing.T) {
	dir := t.TempDir()
	archive, ref, err := Pause(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ref, PauseRepository+":3.") {
		t.Errorf("pause ref %q, want %s:3.*", ref, PauseRepository)
	}
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	l := MustReadLayout(t, data, ref)
	if got := l.Image.Config.Entrypoint; !reflect.DeepEqual(got, []string{"/pause"}) {
		t.Errorf("entrypoint %q, want [/pause]", got)
	}
	if h := l.Layer["pause"]; h == nil || h.Mode != 0o755 || len(l.Layer) != 1 {
		t.Fatalf("layer %v: want only pause, mode 755", l.Layer)
	}
	if err := checkStatic("pause", l.Data["pause"]); err != nil {
		t.Error(err)
	}

	t.Run("Deterministic", func(t *testing.T) {
		archive2, _, err := Pause(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		again, err := os.ReadFile(archive2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, again) {
			t.Errorf("two Pause builds gave different archives (manifest %s, then %s)",
				l.Index.Manifests[0].Digest, MustReadLayout(t, again, ref).Index.Manifests[0].Digest)
		}
	})

	t.Run("Binary", func(t *testing.T) {
		bin := filepath.Join(dir, "pause")
		const ref = "terdut.test/helper:1"
		archive, err := Binary(dir, ref, bin, Config{User: "65532", Cmd: []string{"-v"}})
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(archive)
		if err != nil {
			t.Fatal(err)
		}
		l := MustReadLayout(t, data, ref)
		if got := l.Image.Config; !reflect.DeepEqual(got.Entrypoint, []string{"/pause"}) || got.User != "65532" {
			t.Errorf("image config %+v: want entrypoint /pause, user 65532", got)
		}
		if !strings.Contains(string(l.Data["etc/passwd"]), "nonroot:x:65532:65532:") {
			t.Errorf("/etc/passwd %q lacks nonroot", l.Data["etc/passwd"])
		}
		if h := l.Layer["tmp/"]; h == nil || h.Mode != 0o1777 {
			t.Errorf("/tmp: %+v, want a directory 1777", h)
		}
	})

	t.Run("ErrDynamic", func(t *testing.T) {
		_, err := Binary(t.TempDir(), "terdut.test/true:1", "/bin/true", Config{})
		if err == nil || !strings.Contains(err.Error(), "linked dynamically") {
			t.Errorf("got %v, want a dynamically linked error", err)
		}
	})
}

package ociimage

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
)

// PauseRepository is the name, without tag, of the pause image Pause writes.
const PauseRepository = "terdut.test/pause"

// NonrootUID is the user (and group) "nonroot" of the /etc/passwd of a Binary image.
const NonrootUID = 65532

// Pause compiles build/pause/linux/pause.c of the k8s.io/kubernetes module that
// test/harness/kubetest/kubebin pins, as build/pause/Makefile does (gcc -Os -Wall -Werror -static,
// VERSION v<TAG>-<module version>, stripped), and writes it as the one-layer image
// PauseRepository:<TAG> with entrypoint /pause, in dir. It returns the archive's path and the
// image's reference. It needs go, gcc with a static libc, and strip; the module is
// downloaded when the module cache lacks it.
func Pause(dir string) (archivePath, ref string, err error) {
	src, modVersion, err := kubernetesSource()
	if err != nil {
		return "", "", err
	}
	makefile, err := os.ReadFile(filepath.Join(src, "build/pause/Makefile"))
	if err != nil {
		return "", "", fmt.Errorf("ociimage: pause: %w", err)
	}
	m := regexp.MustCompile(`(?m)^TAG \?= (\S+)$`).FindSubmatch(makefile)
	if m == nil {
		return "", "", fmt.Errorf("ociimage: pause: no TAG in %s/build/pause/Makefile", src)
	}
	tag := string(m[1])
	bin := filepath.Join(dir, "pause")
	// -ffile-prefix-map keeps the module cache's path out of the program.
	if err := run(dir, "gcc", "-Os", "-Wall", "-Werror", "-static", "-ffile-prefix-map="+src+"=.",
		"-DVERSION=v"+tag+"-"+modVersion, "-o", bin, filepath.Join(src, "build/pause/linux/pause.c")); err != nil {
		return "", "", err
	}
	if err := run(dir, "strip", bin); err != nil {
		return "", "", err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", "", err
	}
	ref = PauseRepository + ":" + tag
	archivePath = filepath.Join(dir, "pause-"+tag+".tar")
	files := []File{{Path: "/pause", Mode: 0o755, Data: data}}
	return archivePath, ref, writeFile(archivePath, ref, files, Config{Entrypoint: []string{"/pause"}})
}

// Binary writes the one-layer image ref, in dir, holding the static program bin as
// /<its name>, an /etc/passwd and /etc/group with root and nonroot (NonrootUID), and a /tmp
// (1777). cfg.Entrypoint defaults to the program; cfg.User is left as given (empty: root).
// It returns the archive's path, and an error for a program that is not a static ELF
// executable (a dynamic one would fail only when its container starts).
func Binary(dir, ref, bin string, cfg Config) (archivePath string, err error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("ociimage: %w", err)
	}
	if err := checkStatic(bin, data); err != nil {
		return "", err
	}
	name := "/" + filepath.Base(bin)
	if len(cfg.Entrypoint) == 0 {
		cfg.Entrypoint = []string{name}
	}
	files := []File{
		{Path: name, Mode: 0o755, Data: data},
		{Path: "/etc/passwd", Mode: 0o644, Data: fmt.Appendf(nil,
			"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonrootUID, NonrootUID)},
		{Path: "/etc/group", Mode: 0o644, Data: fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", NonrootUID)},
		{Path: "/home/nonroot", Mode: fs.ModeDir | 0o700, UID: NonrootUID, GID: NonrootUID},
		{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
	}
	if _, err := refTag(ref); err != nil {
		return "", err
	}
	archivePath = filepath.Join(dir, archiveName(ref))
	return archivePath, writeFile(archivePath, ref, files, cfg)
}

// archiveName turns "terdut.test/helper:1" into "terdut.test_helper_1.tar".
func archiveName(ref string) string {
	return strings.NewReplacer("/", "_", ":", "_").Replace(ref) + ".tar"
}

func checkStatic(bin string, data []byte) error {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("ociimage: %s is not an ELF program: %w", bin, err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("ociimage: %s is not an executable (%v)", bin, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("ociimage: %s is linked dynamically; build it static (CGO_ENABLED=0 for Go)", bin)
		}
	}
	return nil
}

// writeFile writes the archive beside its final name and renames it, so that no one sees
// half an archive.
func writeFile(archivePath, ref string, files []File, cfg Config) error {
	tmp, err := os.CreateTemp(filepath.Dir(archivePath), ".ociimage-*.tar")
	if err != nil {
		return fmt.Errorf("ociimage: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := Write(tmp, ref, files, cfg); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("ociimage: %w", err)
	}
	return os.Rename(tmp.Name(), archivePath)
}

// kubernetesSource returns the directory and version of the k8s.io/kubernetes module
// test/harness/kubetest/kubebin requires, downloading it when the module cache lacks it.
func kubernetesSource() (dir, version string, err error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", "", fmt.Errorf("ociimage: cannot find its own source to locate kubebin")
	}
	kubebin := filepath.Join(filepath.Dir(file), "..", "..", "kubetest", "kubebin")
	for attempt := 0; ; attempt++ {
		cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", "k8s.io/kubernetes")
		cmd.Dir = kubebin
		out, err := cmd.Output()
		if err != nil {
			return "", "", fmt.Errorf("ociimage: go list -m k8s.io/kubernetes in %s: %w%s", kubebin, err, stderrOf(err))
		}
		fields := strings.Fields(string(out))
		if len(fields) == 2 {
			return fields[0], fields[1], nil
		}
		if attempt > 0 {
			return "", "", fmt.Errorf("ociimage: k8s.io/kubernetes not in the module cache after go mod download (go list said %q)", out)
		}
		if err := run(kubebin, "go", "mod", "download", "k8s.io/kubernetes"); err != nil {
			return "", "", err
		}
	}
}

func run(dir, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ociimage: %s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return "\n" + string(ee.Stderr)
	}
	return ""
}

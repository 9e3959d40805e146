package scripts

import (
	"bytes"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestServerImage_CABundleIsThePackages: the offline image's CA bundle is Debian's
// ca-certificates as the package ships it, not the build host's merged store: a CA this machine
// trusts locally (under /usr/local/share/ca-certificates: a proxy's, a company's) must not
// become trusted by every install of the image. The build used to copy
// /etc/ssl/certs/ca-certificates.crt, which holds them.
func TestServerImage_CABundleIsThePackages(t *testing.T) {
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Fatal("the offline image is built from Debian's packages: this test needs dpkg (Debian)")
	}
	root := t.TempDir()
	if out, err := exec.Command("./server-image.sh", "--runtime-root", root).CombinedOutput(); err != nil {
		t.Fatalf("server-image.sh --runtime-root: %v\n%s", err, out)
	}
	bundle := mustCerts(t, filepath.Join(root, "etc", "ssl", "certs", "ca-certificates.crt"))
	out, err := exec.Command("dpkg", "-L", "ca-certificates").Output()
	if err != nil {
		t.Fatal(err)
	}
	var shipped int
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, "/usr/share/ca-certificates/mozilla/") && strings.HasSuffix(f, ".crt") {
			for _, c := range mustCerts(t, f) {
				shipped++
				if !containsCert(bundle, c) {
					t.Errorf("the package's %s is missing from the bundle", f)
				}
			}
		}
	}
	if len(bundle) != shipped || shipped == 0 {
		t.Errorf("certificates in the bundle: got %d, want the package's %d", len(bundle), shipped)
	}
	local, _ := filepath.Glob("/usr/local/share/ca-certificates/*.crt")
	for _, f := range local {
		for _, c := range mustCerts(t, f) {
			if containsCert(bundle, c) {
				t.Errorf("the bundle holds %s, a CA this machine trusts locally", f)
			}
		}
	}
	t.Logf("%d certificates of the package; %d local CA files on this machine, none in the bundle", shipped, len(local))
}

// mustCerts returns the DER of every certificate in a PEM file.
func mustCerts(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var certs [][]byte
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return certs
		}
		if block.Type == "CERTIFICATE" {
			certs = append(certs, block.Bytes)
		}
	}
}

func containsCert(certs [][]byte, c []byte) bool {
	for _, x := range certs {
		if bytes.Equal(x, c) {
			return true
		}
	}
	return false
}

package certfile

import (
	"crypto/tls"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/certtest"
)

// secretDir is a directory laid out as Kubernetes mounts a Secret: tls.crt and tls.key are
// links to ..data/tls.crt and ..data/tls.key, and ..data a link to a directory of one
// version, which an update swaps with a rename.
type secretDir struct {
	dir      string
	versions int
}

func mustSecretDir(t *testing.T, l certtest.Leaf) (*secretDir, string, string) {
	t.Helper()
	d := &secretDir{dir: t.TempDir()}
	d.mustSwap(t, l.Cert, l.Key)
	for _, name := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(d.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return d, filepath.Join(d.dir, "tls.crt"), filepath.Join(d.dir, "tls.key")
}

// mustSwap makes cert and key the Secret's new version, atomically.
func (d *secretDir) mustSwap(t *testing.T, cert, key []byte) {
	t.Helper()
	d.versions++
	version := filepath.Join(d.dir, "..version"+strings.Repeat("x", d.versions))
	if err := os.Mkdir(version, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"tls.crt": cert, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(version, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(d.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(version), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d.dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// mustServe serves TLS with the pair on a loopback port until the test ends, looking at the
// files on every handshake, and returns the address.
func mustServe(t *testing.T, p *Pair) string {
	t.Helper()
	p.checkEvery = 0
	p.next.Store(0)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: p.GetCertificate})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = c.(*tls.Conn).Handshake()
				c.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// mustServedSerial makes a new connection, trusting only ca, and returns the serial number
// of the certificate the server showed.
func mustServedSerial(t *testing.T, addr string, ca *certtest.CA) int64 {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr,
		&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

func TestLoad(t *testing.T) {
	ca := certtest.MustCA(t, "test CA")
	dir := t.TempDir()
	certFile, keyFile := ca.MustLeaf(t).MustWrite(t, dir)
	other := ca.MustLeaf(t)
	otherKey := filepath.Join(dir, "other.key")
	if err := os.WriteFile(otherKey, other.Key, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("OK", func(t *testing.T) {
		p, err := Load(certFile, keyFile, nil)
		if err != nil {
			t.Fatalf("got %v, want nil", err)
		}
		if got := p.Certificate().Leaf.SerialNumber.Int64(); got != 2 {
			t.Errorf("got serial %d, want 2", got)
		}
	})
	for _, tt := range []struct {
		name, cert, key string
		want            []string
	}{
		{"ErrNoCertFile", filepath.Join(dir, "missing.crt"), keyFile, []string{"TLS certificate file", "missing.crt", "no such file"}},
		{"ErrNoKeyFile", certFile, filepath.Join(dir, "missing.key"), []string{"TLS key file", "missing.key", "no such file"}},
		{"ErrNotAPair", certFile, otherKey, []string{"are not a pair", "other.key", "private key does not match"}},
		{"ErrKeyAsCert", keyFile, keyFile, []string{"are not a pair", "PEM certificate chain"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.cert, tt.key, nil)
			if err == nil {
				t.Fatalf("got nil, want an error saying %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q, want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "PRIVATE KEY-----") {
				t.Errorf("the error quotes a key: %q", err)
			}
		})
	}
}

// TestPair_Rotation: a pair swapped into the mounted directory is served at the next
// handshake of the same listener, with no restart; a new pair that does not load (a
// certificate whose key is not written yet, a file cut short) leaves the old one served and
// is logged once, however many handshakes see it; and once the pair is whole, it is served.
func TestPair_Rotation(t *testing.T) {
	ca := certtest.MustCA(t, "test CA")
	first, second, third := ca.MustLeaf(t), ca.MustLeaf(t), ca.MustLeaf(t)
	d, certFile, keyFile := mustSecretDir(t, first)
	logs := &apitest.SyncBuffer{}
	p, err := Load(certFile, keyFile, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	addr := mustServe(t, p)
	if got := mustServedSerial(t, addr, ca); got != first.Serial {
		t.Fatalf("before the rotation: got serial %d, want %d", got, first.Serial)
	}

	d.mustSwap(t, second.Cert, second.Key)
	if got := mustServedSerial(t, addr, ca); got != second.Serial {
		t.Fatalf("after the rotation: got serial %d, want %d", got, second.Serial)
	}

	broken := []struct {
		name      string
		cert, key []byte
	}{
		{"the new certificate with the old key", third.Cert, second.Key},
		{"a certificate cut short", third.Cert[:len(third.Cert)/2], third.Key},
	}
	for _, b := range broken {
		d.mustSwap(t, b.cert, b.key)
		for range 3 {
			if got := mustServedSerial(t, addr, ca); got != second.Serial {
				t.Fatalf("with %s: got serial %d, want the previous pair's %d", b.name, got, second.Serial)
			}
		}
	}
	if got, want := strings.Count(logs.String(), "do not load"), len(broken); got != want {
		t.Errorf("got %d lines about pairs that do not load, want %d (one for each):\n%s", got, want, logs)
	}
	if strings.Contains(logs.String(), "PRIVATE KEY") {
		t.Errorf("the log quotes a key:\n%s", logs)
	}

	d.mustSwap(t, third.Cert, third.Key)
	if got := mustServedSerial(t, addr, ca); got != third.Serial {
		t.Fatalf("once the pair is whole: got serial %d, want %d", got, third.Serial)
	}
	if got := strings.Count(logs.String(), "TLS certificate reloaded"); got != 2 {
		t.Errorf("got %d reload lines, want 2:\n%s", got, logs)
	}
}

// TestPair_ChecksAtMostEverySecond: a handshake within CheckEvery of the last look serves
// the pair it has without reading the files.
func TestPair_ChecksAtMostEverySecond(t *testing.T) {
	ca := certtest.MustCA(t, "test CA")
	first, second := ca.MustLeaf(t), ca.MustLeaf(t)
	d, certFile, keyFile := mustSecretDir(t, first)
	p, err := Load(certFile, keyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.mustSwap(t, second.Cert, second.Key)
	got, _ := p.GetCertificate(nil)
	if got.Leaf.SerialNumber.Int64() != first.Serial {
		t.Errorf("right after the load: got serial %d, want %d (no look at the files yet)", got.Leaf.SerialNumber, first.Serial)
	}
	p.next.Store(time.Now().UnixNano())
	got, _ = p.GetCertificate(nil)
	if got.Leaf.SerialNumber.Int64() != second.Serial {
		t.Errorf("once CheckEvery has passed: got serial %d, want %d", got.Leaf.SerialNumber, second.Serial)
	}
}

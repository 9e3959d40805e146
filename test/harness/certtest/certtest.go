// Package certtest makes a throwaway certificate authority for tests, and certificates of
// loopback servers that chain to it, written as the PEM files cert-manager writes.
package certtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority of a test.
type CA struct {
	Cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	serial int64
}

// MustCA makes a certificate authority named name.
func MustCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key := mustKey(tb)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return &CA{Cert: cert, key: key, serial: 1}
}

// Pool is a pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// MustWriteCA writes the CA's certificate as PEM into a file in dir and returns its path.
func (ca *CA) MustWriteCA(tb testing.TB, dir string) string {
	tb.Helper()
	return mustWrite(tb, filepath.Join(dir, "ca.crt"), pemOf("CERTIFICATE", ca.Cert.Raw))
}

// Leaf is a server certificate and its key, both PEM.
type Leaf struct {
	Serial    int64
	Cert, Key []byte
}

// MustLeaf issues a server certificate for localhost, 127.0.0.1 and ::1 with serial number
// one more than the last the CA issued.
func (ca *CA) MustLeaf(tb testing.TB) Leaf {
	tb.Helper()
	ca.serial++
	key := mustKey(tb)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return Leaf{Serial: ca.serial, Cert: pemOf("CERTIFICATE", der), Key: pemOf("PRIVATE KEY", keyDER)}
}

// MustWrite writes the leaf as tls.crt and tls.key in dir and returns their paths.
func (l Leaf) MustWrite(tb testing.TB, dir string) (certFile, keyFile string) {
	tb.Helper()
	return mustWrite(tb, filepath.Join(dir, "tls.crt"), l.Cert), mustWrite(tb, filepath.Join(dir, "tls.key"), l.Key)
}

func mustKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func mustWrite(tb testing.TB, path string, b []byte) string {
	tb.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

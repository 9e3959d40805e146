// Package certfile serves a TLS certificate and its key from two PEM files that something
// else rotates in place (cert-manager writing a Secret that Kubernetes mounts, by a symlink
// swap), picking up each new pair at the next handshake with no restart.
package certfile

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/terdut-server/terdut-server/internal/secretfile"
)

// CheckEvery is how often, at most, a handshake looks at the files again.
const CheckEvery = time.Second

// maxFileBytes bounds each file: a certificate chain or a key is a few KiB.
const maxFileBytes = 1 << 20

// Pair is a certificate and key kept in two files. Its GetCertificate is safe for
// concurrent use and never waits on the files.
type Pair struct {
	certFile, keyFile string
	log               *slog.Logger
	checkEvery        time.Duration

	cert atomic.Pointer[tls.Certificate] // what handshakes get
	next atomic.Int64                    // unix nanoseconds of the next check

	checking sync.Mutex // held by the one handshake that checks; others go on with cert
	loaded   content    // the files' content behind cert
	failed   failure    // the last content that did not load, logged once
}

// failure is a content that did not load, and why.
type failure struct {
	content
	err string
}

// content is what the two files held when read.
type content struct{ cert, key []byte }

func (c content) equal(o content) bool {
	return bytes.Equal(c.cert, o.cert) && bytes.Equal(c.key, o.key)
}

// Load reads the pair now and returns it, or an error that names the file at fault and says
// what it must hold. log (nil: none) gets a line for every new pair and, once for each, a
// new pair that does not load.
func Load(certFile, keyFile string, log *slog.Logger) (*Pair, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pair{certFile: certFile, keyFile: keyFile, log: log, checkEvery: CheckEvery}
	c, err := p.read()
	if err != nil {
		return nil, err
	}
	cert, err := c.parse(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	p.cert.Store(cert)
	p.loaded = c
	p.next.Store(time.Now().Add(p.checkEvery).UnixNano())
	return p, nil
}

// Certificate returns the pair served now.
func (p *Pair) Certificate() *tls.Certificate { return p.cert.Load() }

// GetCertificate is for tls.Config.GetCertificate: the pair served now, after a look at the
// files if the last was more than CheckEvery ago. A new pair that does not load (a file
// half-written, a key that does not match) leaves the old one served.
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if now := time.Now(); now.UnixNano() >= p.next.Load() && p.checking.TryLock() {
		p.next.Store(now.Add(p.checkEvery).UnixNano())
		p.reload()
		p.checking.Unlock()
	}
	return p.cert.Load(), nil
}

// reload loads the files if their content changed since the last load or failure.
func (p *Pair) reload() {
	c, err := p.read()
	if err == nil && c.equal(p.loaded) {
		p.failed = failure{}
		return
	}
	if err == nil && c.equal(p.failed.content) {
		return
	}
	var cert *tls.Certificate
	if err == nil {
		cert, err = c.parse(p.certFile, p.keyFile)
	}
	if err != nil {
		if f := (failure{c, err.Error()}); !f.equal(p.failed.content) || f.err != p.failed.err {
			p.log.Error("the TLS certificate files changed but do not load: still serving the previous certificate", "err", err)
			p.failed = f
		}
		return
	}
	p.cert.Store(cert)
	p.loaded, p.failed = c, failure{}
	p.log.Info("TLS certificate reloaded", "cert_file", p.certFile, "not_after", cert.Leaf.NotAfter)
}

func (p *Pair) read() (content, error) {
	cert, err := secretfile.Read(p.certFile, maxFileBytes)
	if err != nil {
		return content{}, fmt.Errorf("the TLS certificate file %s: %w", p.certFile, err)
	}
	key, err := secretfile.Read(p.keyFile, maxFileBytes)
	if err != nil {
		return content{}, fmt.Errorf("the TLS key file %s: %w", p.keyFile, err)
	}
	return content{cert: cert, key: key}, nil
}

// parse makes a certificate of the content; its error never quotes the key.
func (c content) parse(certFile, keyFile string) (*tls.Certificate, error) {
	cert, err := tls.X509KeyPair(c.cert, c.key)
	if err != nil {
		return nil, fmt.Errorf("the certificate in %s and the key in %s are not a pair (%v): give a PEM certificate chain and its unencrypted PEM private key, as cert-manager writes tls.crt and tls.key", certFile, keyFile, err)
	}
	return &cert, nil
}

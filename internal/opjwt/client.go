package opjwt

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
)

// NewHTTPClient returns a client for the issuer's discovery document and JWKS. With caFile
// (a PEM bundle, such as a pod's service-account ca.crt) it trusts only those CAs; without,
// the system's. It fails when caFile cannot be read or holds no certificate.
func NewHTTPClient(caFile string) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("the file holds no PEM certificate")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, Timeout: fetchTimeout,
		// The issuer's endpoints answer directly; a redirect could carry the Bearer token elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return fmt.Errorf("the issuer answered with a redirect, which is not followed")
		}}, nil
}

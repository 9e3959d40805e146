package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/terdut-server/terdut-server/internal/opjwt"
)

// defaultServiceAccountTokenFile is where Kubernetes mounts a pod's own service-account token.
const defaultServiceAccountTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// OperatorOIDCConfig are the settings by which the operator proves itself with a
// service-account token (a JWT of its cluster's issuer) instead of a shared secret.
type OperatorOIDCConfig struct {
	Issuer    string    // empty: off
	Audience  string    // the token's aud must hold it
	Subjects  commaList // the token's sub must be one of them
	CAFile    string    // CA bundle for the issuer's TLS; empty: the system's
	TokenFile string    // this server's own token, sent to the issuer's endpoints when the file exists
}

// define adds the --operator-oidc-* flags.
func (c *OperatorOIDCConfig) define(fs *flag.FlagSet) {
	fs.StringVar(&c.Issuer, "operator-oidc-issuer", "", "issuer of the operator's service-account tokens, such as https://kubernetes.default.svc.cluster.local; empty: off")
	fs.StringVar(&c.Audience, "operator-oidc-audience", "terdut-server", "audience the operator's service-account token must be minted for")
	fs.TextVar(&c.Subjects, "operator-oidc-subjects", commaList(nil), "comma-separated subjects allowed to act as the operator, such as system:serviceaccount:terdut-operator-system:terdut-operator")
	fs.StringVar(&c.CAFile, "operator-oidc-ca-file", "", "CA bundle that the issuer's TLS certificate chains to (in a pod: the service account's ca.crt); empty: the system's")
	fs.StringVar(&c.TokenFile, "operator-oidc-issuer-token-file", defaultServiceAccountTokenFile,
		"this server's own service-account token, sent as a Bearer token to the issuer's discovery and JWKS endpoints (https only) when the file exists")
}

// problems returns what is wrong with the settings, each naming its setting.
func (c OperatorOIDCConfig) problems() []string {
	var p []string
	if c.Issuer == "" {
		for setting, set := range map[string]bool{"--operator-oidc-subjects": len(c.Subjects) > 0, "--operator-oidc-ca-file": c.CAFile != ""} {
			if set {
				p = append(p, setting+" is set but --operator-oidc-issuer is not")
			}
		}
		return p
	}
	if err := opjwt.CheckIssuer(c.Issuer); err != nil {
		p = append(p, fmt.Sprintf("--operator-oidc-issuer %q: %v", c.Issuer, err))
	}
	if len(c.Subjects) == 0 {
		p = append(p, "--operator-oidc-issuer is set but --operator-oidc-subjects is not: name the operator's service account, such as system:serviceaccount:terdut-operator-system:terdut-operator")
	}
	if strings.TrimSpace(c.Audience) == "" {
		p = append(p, "--operator-oidc-audience is empty: give the audience of the operator's projected token (terdut-server)")
	}
	if c.CAFile != "" {
		if _, err := opjwt.NewHTTPClient(c.CAFile); err != nil {
			p = append(p, fmt.Sprintf("--operator-oidc-ca-file %s: %v", c.CAFile, err))
		}
	}
	return p
}

// commaList is a comma-separated setting: blanks around items and empty items are dropped.
type commaList []string

// UnmarshalText splits text at commas.
func (l *commaList) UnmarshalText(text []byte) error {
	*l = splitList(string(text))
	return nil
}

// MarshalText joins the list with commas.
func (l commaList) MarshalText() ([]byte, error) { return []byte(strings.Join(l, ",")), nil }

package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/terdut-server/terdut-server/internal/opjwt"
)

// Where Kubernetes mounts a pod's own service-account token and its cluster's CA.
const (
	defaultServiceAccountTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	defaultServiceAccountCAFile    = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
)

// OperatorOIDCConfig are the settings by which the operator proves itself with a
// service-account token (a JWT of its cluster's issuer) instead of a shared secret.
type OperatorOIDCConfig struct {
	Issuer    commaList // empty: off; the first is read, the others accepted too (a move of issuers)
	Audience  string    // the token's aud must hold it
	Subjects  commaList // the token's sub must be one of them
	CAFile    string    // CA bundle for the issuer's TLS; empty: the system's
	TokenFile string    // this server's own token, sent to the issuer's endpoints when the file exists
	JWKSURL   string    // where the keys are, for a layout that serves them elsewhere; empty: the issuer's origin
	// ReviewURL, when set, is the API server asked about each token (TokenReview), with
	// ReviewCAFile and TokenFile.
	ReviewURL    string
	ReviewCAFile string
}

// define adds the --operator-oidc-* flags.
func (c *OperatorOIDCConfig) define(fs *flag.FlagSet) {
	fs.TextVar(&c.Issuer, "operator-oidc-issuer", commaList(nil),
		"issuer of the operator's service-account tokens, such as https://kubernetes.default.svc.cluster.local; during a move of issuers, both, comma-separated, the one whose discovery answers first; empty: off")
	fs.StringVar(&c.Audience, "operator-oidc-audience", "terdut-server", "audience the operator's service-account token must be minted for")
	fs.TextVar(&c.Subjects, "operator-oidc-subjects", commaList(nil), "comma-separated subjects allowed to act as the operator, such as system:serviceaccount:terdut-operator-system:terdut-operator")
	fs.StringVar(&c.CAFile, "operator-oidc-ca-file", "", "CA bundle that the issuer's TLS certificate chains to (in a pod: the service account's ca.crt); empty: the system's")
	fs.StringVar(&c.TokenFile, "operator-oidc-issuer-token-file", defaultServiceAccountTokenFile,
		"this server's own service-account token, sent as a Bearer token to the issuer's discovery and JWKS endpoints (https only) when the file exists, and with token reviews")
	fs.StringVar(&c.JWKSURL, "operator-oidc-jwks-url", "",
		"where the issuer's keys are, for a layout that serves them neither at discovery's jwks_uri on the issuer's origin nor at its path there; empty: found through discovery")
	fs.StringVar(&c.ReviewURL, "operator-oidc-token-review-url", "",
		"the cluster's API server (in a pod: https://kubernetes.default.svc), asked about each service-account token that passes the offline checks (TokenReview), so that a token of a deleted pod or service account is refused (within the API server's 10 s cache of a token it accepted); empty: offline checks only")
	fs.StringVar(&c.ReviewCAFile, "operator-oidc-token-review-ca-file", defaultServiceAccountCAFile,
		"CA bundle of the API server asked with --operator-oidc-token-review-url (in a pod: the service account's ca.crt)")
}

// opjwtConfig is the verifier's configuration of these settings.
func (c OperatorOIDCConfig) opjwtConfig() opjwt.Config {
	cfg := opjwt.Config{Issuer: c.Issuer[0], OtherIssuers: c.Issuer[1:], Audience: c.Audience, Subjects: c.Subjects,
		CAFile: c.CAFile, AuthTokenFile: c.TokenFile, JWKSURL: c.JWKSURL}
	if c.ReviewURL != "" {
		cfg.Review = &opjwt.ReviewConfig{URL: c.ReviewURL, CAFile: c.ReviewCAFile, TokenFile: c.TokenFile}
	}
	return cfg
}

// problems returns what is wrong with the settings, each naming its setting.
func (c OperatorOIDCConfig) problems() []string {
	var p []string
	if len(c.Issuer) == 0 {
		for setting, set := range map[string]bool{"--operator-oidc-subjects": len(c.Subjects) > 0, "--operator-oidc-ca-file": c.CAFile != "",
			"--operator-oidc-jwks-url": c.JWKSURL != "", "--operator-oidc-token-review-url": c.ReviewURL != ""} {
			if set {
				p = append(p, setting+" is set but --operator-oidc-issuer is not")
			}
		}
		return p
	}
	for _, iss := range c.Issuer {
		if err := opjwt.CheckIssuer(iss); err != nil {
			p = append(p, fmt.Sprintf("--operator-oidc-issuer %q: %v", iss, err))
		}
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
	if len(p) == 0 && len(c.Subjects) > 0 && strings.TrimSpace(c.Audience) != "" {
		// What opjwt.New checks beyond the above: the JWKS URL and the token review's URL and
		// CA, each named by its setting.
		if _, err := opjwt.New(c.opjwtConfig()); err != nil {
			setting := "--operator-oidc-jwks-url"
			if strings.HasPrefix(err.Error(), "token review") {
				setting = "--operator-oidc-token-review-url"
			}
			p = append(p, fmt.Sprintf("%s: %v", setting, err))
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

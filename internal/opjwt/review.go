package opjwt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/terdut-server/terdut-server/internal/logcap"
)

// ReviewConfig asks the cluster's API server whether it still accepts each token that passes
// the offline checks (a TokenReview, as Vault's Kubernetes method does): a token bound to a
// pod that was deleted, or of a service account that was deleted or recreated, is refused as
// soon as the API server says so (at once for a token it has not reviewed in the last 10
// seconds, its cache), where the offline checks accept it until it expires. When the API server cannot be
// reached, or refuses the review, the token is neither accepted nor refused: the request
// answers 503 and the operator retries. Failing closed costs the operator a claim while the
// API server is away; failing open would give whoever can cut this server off from it the use
// of a stolen token of a deleted pod.
type ReviewConfig struct {
	URL       string // the API server, such as https://kubernetes.default.svc; https only
	CAFile    string // the CA bundle its certificate chains to (in a pod: the service account's ca.crt)
	TokenFile string // this server's own token, allowed to create TokenReviews; re-read on every review
}

// reviewer sends TokenReviews.
type reviewer struct {
	endpoint string
	audience string
	client   *http.Client
	token    func() bearer
}

func newReviewer(cfg ReviewConfig, audience string) (*reviewer, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("URL %q: give the API server's https URL, such as https://kubernetes.default.svc", cfg.URL)
	}
	if cfg.CAFile == "" {
		return nil, errors.New("no CA file: the API server's certificate must chain to the cluster's CA (a pod's ca.crt)")
	}
	hc, err := NewHTTPClient(cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("CA file %s: %w", cfg.CAFile, err)
	}
	if cfg.TokenFile == "" {
		return nil, errors.New("no token file: the review is asked with this server's own service-account token")
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/apis/authentication.k8s.io/v1/tokenreviews"
	return &reviewer{endpoint: u.String(), audience: audience, client: hc,
		token: func() bearer { return readBearer(cfg.TokenFile) }}, nil
}

type tokenReview struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Token     string   `json:"token"`
		Audiences []string `json:"audiences"`
	} `json:"spec"`
	Status struct {
		Authenticated bool `json:"authenticated"`
		User          struct {
			Username string `json:"username"`
		} `json:"user"`
		Audiences []string `json:"audiences"`
		Error     string   `json:"error"`
	} `json:"status"`
}

// check asks the API server about token, which the offline checks found to be subject's for
// the audience. It returns a *RefusedError when the API server does not accept it, and an
// error wrapping ErrUnavailable when it could not be asked.
func (r *reviewer) check(ctx context.Context, token, subject string) error {
	auth := r.token()
	if auth.err != nil || auth.token == "" {
		return fmt.Errorf("%w: no token of this server's own to ask the API server with: %v", ErrUnavailable, auth.err)
	}
	var review tokenReview
	review.APIVersion, review.Kind = "authentication.k8s.io/v1", "TokenReview"
	review.Spec.Token, review.Spec.Audiences = token, []string{r.audience}
	body, err := json.Marshal(review)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+auth.token)
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: the API server could not be asked to review the token: %w", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: the API server answered the token review with status %d (may this server's account create tokenreviews?)", ErrUnavailable, resp.StatusCode)
	}
	var got tokenReview
	if err := readJSON(resp.Body, "the token review", &got); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	switch st := got.Status; {
	case !st.Authenticated:
		return refuse(ReasonRevoked, "the API server no longer accepts the token: %s", logcap.String(st.Error))
	case st.User.Username != subject:
		return refuse(ReasonRevoked, "the API server says the token is %q's, not %q's", logcap.String(st.User.Username), logcap.String(subject))
	case len(st.Audiences) == 0:
		// An API server that ignores spec.audiences answers none: it has not checked ours.
		return refuse(ReasonRevoked, "the API server's review names no audience: it does not confirm that the token is for %s", r.audience)
	case !slices.Contains(st.Audiences, r.audience):
		return refuse(ReasonRevoked, "the API server accepts the token for other audiences than %s", r.audience)
	}
	return nil
}

package zitadeltest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// This file is the provider's storage: the op.Storage that the zitadel OP calls, held in
// memory. It is adapted from the example storage the zitadel/oidc module ships
// (example/server/storage), cut down to the authorization code flow with PKCE and extended
// with the claims a test gives each user.

var errUnsupported = errors.New("zitadeltest: not supported by this test provider")

// authRequest is a sign-in in progress at the provider.
type authRequest struct {
	id        string
	req       oidc.AuthRequest
	subject   string
	done      bool
	authTime  time.Time
	code      string
	createdAt time.Time
}

func (a *authRequest) GetID() string         { return a.id }
func (a *authRequest) GetACR() string        { return "" }
func (a *authRequest) GetAMR() []string      { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string { return []string{a.req.ClientID} }
func (a *authRequest) GetAuthTime() time.Time {
	return a.authTime
}
func (a *authRequest) GetClientID() string { return a.req.ClientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge {
	if a.req.CodeChallenge == "" {
		return nil
	}
	return &oidc.CodeChallenge{Challenge: a.req.CodeChallenge, Method: a.req.CodeChallengeMethod}
}
func (a *authRequest) GetNonce() string                   { return a.req.Nonce }
func (a *authRequest) GetRedirectURI() string             { return a.req.RedirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType { return a.req.ResponseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode { return a.req.ResponseMode }
func (a *authRequest) GetScopes() []string                { return a.req.Scopes }
func (a *authRequest) GetState() string                   { return a.req.State }
func (a *authRequest) GetSubject() string                 { return a.subject }
func (a *authRequest) Done() bool                         { return a.done }

// accessToken is what an access token was issued for.
type accessToken struct {
	subject string
	scopes  []string
	expires time.Time
}

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }

type publicKey struct{ signingKey }

func (k *publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *publicKey) Use() string                        { return "sig" }
func (k *publicKey) Key() any                           { return &k.key.PublicKey }

// storage implements op.Storage (and op.CanSetUserinfoFromRequest) in memory.
type storage struct {
	client *client
	key    signingKey

	mu           sync.Mutex
	users        map[string]User
	defaultUser  string
	authRequests map[string]*authRequest
	codes        map[string]string // code -> auth request id
	tokens       map[string]accessToken
	userInfoOK   int64 // UserInfo answers given
}

func newStorage(c *client) (*storage, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	return &storage{client: c, key: signingKey{id: rand.Text(), key: key}, users: map[string]User{},
		authRequests: map[string]*authRequest{}, codes: map[string]string{}, tokens: map[string]accessToken{}}, nil
}

// CreateAuthRequest records a validated authorization request.
func (s *storage) CreateAuthRequest(_ context.Context, req *oidc.AuthRequest, userID string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &authRequest{id: rand.Text(), req: *req, subject: userID, createdAt: time.Now()}
	s.authRequests[a.id] = a
	return a, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.authRequests[id]
	if !ok {
		return nil, errors.New("auth request not found")
	}
	return a, nil
}

func (s *storage) AuthRequestByCode(_ context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.authRequests[s.codes[code]]
	if !ok {
		return nil, errors.New("code not found")
	}
	return a, nil
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.authRequests[id]
	if !ok {
		return errors.New("auth request not found")
	}
	a.code = code
	s.codes[code] = id
	return nil
}

func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.authRequests[id]; ok {
		delete(s.codes, a.code)
	}
	delete(s.authRequests, id)
	return nil
}

// approve marks the auth request signed in as the user the login hint names, or the default.
func (s *storage) approve(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.authRequests[id]
	if !ok {
		return errors.New("auth request not found")
	}
	sub := a.req.LoginHint
	if _, known := s.users[sub]; !known {
		sub = s.defaultUser
	}
	a.subject, a.done, a.authTime = sub, true, time.Now()
	return nil
}

func (s *storage) CreateAccessToken(_ context.Context, req op.TokenRequest) (string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, expires := rand.Text(), time.Now().Add(time.Hour)
	s.tokens[id] = accessToken{subject: req.GetSubject(), scopes: slices.Clone(req.GetScopes()), expires: expires}
	return id, expires, nil
}

func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, errUnsupported
}

func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, errUnsupported
}

func (s *storage) TerminateSession(context.Context, string, string) error { return nil }

func (s *storage) RevokeToken(context.Context, string, string, string) *oidc.Error {
	return oidc.ErrUnsupportedGrantType().WithDescription("revocation is not supported")
}

func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) { return &s.key, nil }

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{&publicKey{s.key}}, nil
}

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	if id != s.client.id {
		return nil, errors.New("unknown client")
	}
	return s.client, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	if id != s.client.id || secret != s.client.secret {
		return errors.New("invalid client credentials")
	}
	return nil
}

// SetUserinfoFromScopes is deprecated in op.Storage; SetUserinfoFromRequest does the work.
func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

// SetUserinfoFromRequest fills the ID token's claims. The OP has already dropped the profile
// and email scopes unless the client asserts userinfo claims into the ID token; the test's
// custom claims (groups and the like) follow the same choice.
func (s *storage) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	return s.setUserinfo(info, req.GetSubject(), scopes, s.client.claimsInIDToken)
}

// SetUserinfoFromToken answers the UserInfo endpoint for an access token.
func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, subject, _ string) error {
	s.mu.Lock()
	t, ok := s.tokens[tokenID]
	s.mu.Unlock()
	if !ok || t.subject != subject || time.Now().After(t.expires) {
		return errors.New("invalid access token")
	}
	if err := s.setUserinfo(info, subject, t.scopes, true); err != nil {
		return err
	}
	s.mu.Lock()
	s.userInfoOK++
	s.mu.Unlock()
	return nil
}

// setUserinfo sets the claims of user sub that the scopes give, and the user's custom
// claims when withCustom.
func (s *storage) setUserinfo(info *oidc.UserInfo, sub string, scopes []string, withCustom bool) error {
	s.mu.Lock()
	u, ok := s.users[sub]
	s.mu.Unlock()
	if !ok {
		return errors.New("unknown user")
	}
	for _, scope := range scopes {
		switch scope {
		case oidc.ScopeOpenID:
			info.Subject = u.Subject
		case oidc.ScopeProfile:
			info.PreferredUsername, info.Name = u.Username, u.Name
		case oidc.ScopeEmail:
			info.Email = u.Email
			switch v := u.EmailVerified.(type) {
			case bool:
				info.EmailVerified = oidc.Bool(v)
				if !v {
					info.AppendClaims("email_verified", false) // the OP omits a false Bool
				}
			case nil:
			default:
				info.AppendClaims("email_verified", v) // as Cognito sends it: "true"
			}
		}
	}
	if withCustom {
		for k, v := range u.Claims {
			info.AppendClaims(k, v)
		}
	}
	return nil
}

func (s *storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errUnsupported
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errUnsupported
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errUnsupported
}

func (s *storage) Health(context.Context) error { return nil }

package kubetest

import (
	"fmt"
	"os"
	"path/filepath"
)

// Kubeconfig writes a kubeconfig of the cluster's admin (its static system:masters token)
// in the API server's directory and returns its path: what kubectl and helm read with
// --kubeconfig. The file goes with the directory when the test ends.
func (a *APIServer) Kubeconfig() string {
	a.tb.Helper()
	p := filepath.Join(a.Dir, "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
  - name: kubetest
    cluster:
      server: %s
      certificate-authority: %s
users:
  - name: kubetest-admin
    user:
      token: %s
contexts:
  - name: kubetest
    context:
      cluster: kubetest
      user: kubetest-admin
current-context: kubetest
`, a.URL, a.CA.File, a.admin)
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		a.tb.Fatal(err)
	}
	return p
}

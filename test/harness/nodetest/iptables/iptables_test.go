package iptables

import (
	"slices"
	"testing"
)

func TestSplit(t *testing.T) {
	got := split(`FORWARD -m comment --comment "a \"b\" -j KUBE-ROUTER-INPUT" -j ACCEPT`)
	want := []string{"FORWARD", "-m", "comment", "--comment", `a "b" -j KUBE-ROUTER-INPUT`, "-j", "ACCEPT"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestRemoval_Table: the batch names the table it was given, and a chain's own rules are
// flushed with it, not deleted one by one.
func TestRemoval_Table(t *testing.T) {
	saved := "*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-KUBELET-CANARY - [0:0]\n:OTHER - [0:0]\n" +
		"-A PREROUTING -j KUBE-KUBELET-CANARY\n-A KUBE-KUBELET-CANARY -j RETURN\n-A OTHER -j RETURN\nCOMMIT\n"
	want := "*nat\n-D PREROUTING -j KUBE-KUBELET-CANARY\n-F KUBE-KUBELET-CANARY\n-X KUBE-KUBELET-CANARY\nCOMMIT\n"
	if got := Removal(saved, "nat", func(c string) bool { return c == "KUBE-KUBELET-CANARY" }); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

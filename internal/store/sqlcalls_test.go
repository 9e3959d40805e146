package store_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// unqualifiedCalls are the functions the store's statements may call without naming
// pg_catalog, each because pg_catalog's candidate matches the types it is given exactly (so,
// searched first, it wins over any overload another role plants; see schema.go): a call with
// another type, a polymorphic function, or an operator on arrays names pg_catalog instead.
var unqualifiedCalls = map[string]string{
	"now":                   "now(): no argument",
	"count":                 "count(*) only: count(x) takes \"any\" and is qualified",
	"min":                   "min over timestamptz and bigint columns",
	"max":                   "max over bigint columns",
	"lower":                 "lower(text) over a text column or an untyped argument, which resolves to text",
	"set_config":            "set_config(text, text, boolean) with untyped text arguments",
	"current_setting":       "current_setting(text)",
	"starts_with":           "starts_with(text, text) over a text column",
	"chr":                   "chr(integer) with an integer literal",
	"pg_advisory_xact_lock": "pg_advisory_xact_lock(bigint) over a bigint",
	"extract":               "EXTRACT(field FROM x) is syntax: the parser calls pg_catalog.extract by that qualified name",
}

// callPattern finds a name followed by "(" and what comes right after it.
// A qualifier of %s is the schema of the server's objects, filled in at run time.
var callPattern = regexp.MustCompile(`(?i)((?:%s|\b[a-z_][a-z0-9_]*)\.)?\b([a-z_][a-z0-9_]*)\s*\(\s*(\*?)`)

// sqlPattern tells a statement from the store's other strings (messages, names).
var sqlPattern = regexp.MustCompile(`\b(SELECT|INSERT|UPDATE|DELETE|WITH)\b`)

// TestStatementsQualifyCalls reads every string literal of the store's code and, for each name
// of a statement followed by "(" that Postgres knows as a function (its own or the server's), requires pg_catalog's name before it
// or its place in unqualifiedCalls: a new call of a function cannot come in without the
// question TestShadowing asks of the others.
func TestStatementsQualifyCalls(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.MustDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT DISTINCT proname::text FROM pg_catalog.pg_proc`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	functions := make(map[string]bool, len(names))
	for _, n := range names {
		functions[n] = true
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var calls int
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING || !sqlPattern.MatchString(lit.Value) {
				return true
			}
			for _, m := range callPattern.FindAllStringSubmatch(lit.Value, -1) {
				qualifier, fn, star := strings.ToLower(m[1]), strings.ToLower(m[2]), m[3]
				if !functions[fn] || qualifier == "pg_catalog." || qualifier == "%s." {
					continue
				}
				calls++
				pos := fset.Position(lit.Pos())
				switch {
				case qualifier != "":
					t.Errorf("%s: %s%s(: a function of schema %s; name the schema the server's objects are in as apiKeyLookup does",
						pos, qualifier, fn, strings.TrimSuffix(qualifier, "."))
				case fn == "count" && star != "*":
					t.Errorf("%s: count(x) takes \"any\": write pg_catalog.count(x)", pos)
				case unqualifiedCalls[fn] == "":
					t.Errorf("%s: %s( is not qualified: write pg_catalog.%s( (or, where pg_catalog's candidate takes exactly the types given, add it to unqualifiedCalls, and its overloads to TestShadowing's shadows)", pos, fn, fn)
				}
			}
			return true
		})
	}
	if calls < 10 {
		t.Fatalf("found %d unqualified calls of functions in the store's statements; the scan is broken", calls)
	}
}

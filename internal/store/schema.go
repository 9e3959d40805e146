package store

import (
	"context"
	"strings"
)

// The server's statements find its tables, and the functions it made (api_key_owner and the
// triggers' functions), through the search_path of its connections; built-in functions and
// operators come from pg_catalog, which Postgres searches first. Another role that may create
// objects in a schema on that path can still take over a call (PostgreSQL's CVE-2018-1058):
// with an exact-typed overload where pg_catalog's candidate takes a polymorphic type
// (unnest(anyarray), the arrays' ||), a type the argument must be cast to (hashtextextended's
// bigint), or where the argument arrives untyped and a text overload is preferred
// (api_key_owner's bytea). So every such call the store makes names pg_catalog, or its schema
// and its argument's type, and the functions it made have their search_path pinned
// (migrations/00019_pin_search_path.sql); TestShadowing plants each overload another role can
// and checks that none is ever called. What it cannot make safe is a schema another role may
// write to in itself: SchemaWriters names those roles, for the warning at start.

// SchemaExposure is who, besides the server's own role, may create objects where the server
// looks for its own.
type SchemaExposure struct {
	// Schema is where the server's objects are: the first schema of its search_path.
	Schema string
	// Public says every role, present and future, may create in Schema (the PUBLIC grant
	// PostgreSQL 14 and older give the schema public).
	Public bool
	// Creators are other login roles that may create in Schema, superusers and members of the
	// server's role (which act as the server) aside; at most MaxNamed, in order of name.
	Creators []string
	// SchemaMakers are other login roles that may create schemas in the database while the
	// search_path begins with "$user" and no schema has the server's role's name: one named so
	// would come before Schema. At most MaxNamed, in order of name.
	SchemaMakers []string
	// More says there were more roles than named.
	More bool
}

// MaxNamed bounds the roles a SchemaExposure names, so that a cluster with many roles makes
// one readable line.
const MaxNamed = 10

// Exposed reports whether any other role may create where the server looks for its objects.
func (e SchemaExposure) Exposed() bool {
	return e.Public || len(e.Creators) > 0 || len(e.SchemaMakers) > 0
}

// String says who may create what, in one line for the log.
func (e SchemaExposure) String() string {
	var parts []string
	if e.Public {
		parts = append(parts, "every role (PUBLIC) may create in schema "+e.Schema)
	}
	if len(e.Creators) > 0 {
		parts = append(parts, "may create in schema "+e.Schema+": "+strings.Join(e.Creators, ", "))
	}
	if len(e.SchemaMakers) > 0 {
		parts = append(parts, "may create a schema named for the server's role, first on its search_path: "+strings.Join(e.SchemaMakers, ", "))
	}
	s := strings.Join(parts, "; ")
	if e.More {
		s += " (and more roles)"
	}
	return s
}

// schemaWritersSQL finds the roles of SchemaExposure in one statement; every function it calls
// is pg_catalog's, by name.
const schemaWritersSQL = `
	WITH me AS (
		SELECT pg_catalog.current_schema() AS schema,
			pg_catalog.current_setting('search_path') LIKE '%$user%'
				AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = current_user) AS user_first)
	SELECT me.schema, pg_catalog.has_schema_privilege('public', me.schema, 'CREATE'),
		coalesce(w.creates, false), w.rolname
	FROM me LEFT JOIN LATERAL (
		SELECT r.rolname, pg_catalog.has_schema_privilege(r.oid, me.schema, 'CREATE') AS creates,
			me.user_first AND pg_catalog.has_database_privilege(r.oid, pg_catalog.current_database(), 'CREATE') AS makes
		FROM pg_catalog.pg_roles r
		WHERE r.rolcanlogin AND NOT r.rolsuper AND r.rolname <> current_user
			AND NOT pg_catalog.pg_has_role(r.oid, current_user, 'MEMBER')
	) w ON w.creates OR w.makes
	ORDER BY w.rolname LIMIT $1`

// SchemaWriters says which roles other than the server's may create objects where the server
// looks for its own, read once at start (SchemaExposure). It returns ErrUnavailable when the
// database cannot be reached.
func (s *Store) SchemaWriters(ctx context.Context) (SchemaExposure, error) {
	var e SchemaExposure
	rows, err := s.pool.Query(ctx, schemaWritersSQL, 2*MaxNamed+1)
	if err != nil {
		return e, wrap(err, "read who may create in the server's schema")
	}
	defer rows.Close()
	var named int
	for rows.Next() {
		var schema *string
		var creates bool
		var role *string
		if err := rows.Scan(&schema, &e.Public, &creates, &role); err != nil {
			return e, wrap(err, "read who may create in the server's schema")
		}
		if schema != nil {
			e.Schema = *schema
		}
		if role == nil {
			continue
		}
		if named++; named > MaxNamed {
			e.More = true
			continue
		}
		if creates {
			e.Creators = append(e.Creators, *role)
		} else {
			e.SchemaMakers = append(e.SchemaMakers, *role)
		}
	}
	return e, wrap(rows.Err(), "read who may create in the server's schema")
}

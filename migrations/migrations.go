// Package migrations holds Alicia's SQL schema, applied in order by goose
// (storage.Migrate, at start-up or with `alicia migrate`).
package migrations

import "embed"

// FS holds the migration files.
//
//go:embed *.sql
var FS embed.FS

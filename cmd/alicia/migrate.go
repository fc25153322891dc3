package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alicia-voice/alicia/storage"
)

func runMigrate(ctx context.Context, args []string, _ io.Reader, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("database", os.Getenv("ALICIA_DATABASE_URL"), "Postgres URL (ALICIA_DATABASE_URL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	direction := "up"
	if fs.NArg() > 0 {
		direction = fs.Arg(0)
	}
	if *url == "" {
		return errors.New("no database: set ALICIA_DATABASE_URL or -database")
	}
	pool, err := pgxpool.New(ctx, *url)
	if err != nil {
		return err
	}
	defer pool.Close()
	return storage.Migrate(ctx, pool, direction)
}

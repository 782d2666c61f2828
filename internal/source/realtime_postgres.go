package source

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// postgres is a PostgreSQL database, read with pgx.
type postgres struct{ cfg *pgx.ConnConfig }

// newPostgres parses a PostgreSQL URL or libpq's key=value pairs. Its
// error never quotes the DSN: pgx's may.
func newPostgres(dsn string) (database, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("not a PostgreSQL connection string (postgres://USER:PASSWORD@HOST:PORT/DATABASE or KEY=VALUE pairs) " +
			"nor a MySQL one (mysql://USER:PASSWORD@HOST:PORT/DATABASE or USER:PASSWORD@tcp(HOST:PORT)/DATABASE)")
	}
	// The simple protocol returns every value as text, whatever the
	// column's type: the text Asterisk's res_config_pgsql reads.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	cfg.RuntimeParams["application_name"] = "qualifyd"
	return &postgres{cfg: cfg}, nil
}

func (p *postgres) password() string { return p.cfg.Password }

// begin opens a REPEATABLE READ, READ ONLY transaction: one snapshot,
// taken at its first query.
func (p *postgres) begin(ctx context.Context) (snapshot, error) {
	conn, err := pgx.ConnectConfig(ctx, p.cfg)
	if err != nil {
		return nil, err
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return &pgSnapshot{ctx: ctx, conn: conn, tx: tx}, nil
}

// pgSnapshot is one PostgreSQL transaction; ctx is the read's, which
// bounds the rollback and the close.
type pgSnapshot struct {
	ctx  context.Context
	conn *pgx.Conn
	tx   pgx.Tx
}

func (s *pgSnapshot) query(ctx context.Context, sql string, row func([][]byte)) ([]string, error) {
	rows, err := s.tx.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cols []string
	for _, f := range rows.FieldDescriptions() {
		cols = append(cols, f.Name)
	}
	for rows.Next() {
		row(rows.RawValues())
	}
	return cols, rows.Err()
}

func (s *pgSnapshot) quote(name string) string { return pgx.Identifier{name}.Sanitize() }

func (s *pgSnapshot) close() {
	_ = s.tx.Rollback(s.ctx)
	s.conn.Close(s.ctx)
}

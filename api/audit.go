package api

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// AuditConfig enables the audit routes:
//
//	GET /v1/audit/head    the journal's chain head now (signed when the
//	                      journal has a signing key), the last stored
//	                      checkpoint, the refund-number epoch and whether a
//	                      restore's reconciliation is pending (permission
//	                      audit: auditors and operators)
//	GET /v1/admin/backup  a consistent copy of the live journal file
//	                      (permission operate: operators only; the file
//	                      holds every request)
//	GET /v1/admin/archive/{file}
//	                      one segment or manifest of the journal's archive,
//	                      by the name the journal records for it, so that a
//	                      hot backup of an archived journal is whole
//	                      (permission operate; 404 for any other name, and
//	                      on a journal without archival)
type AuditConfig struct {
	// Journal is the live journal. Required.
	Journal AuditJournal
	// BackupTimeout bounds one backup download; the server's WriteTimeout
	// does not apply to it. Zero means 10 minutes.
	BackupTimeout time.Duration
	// SpoolDir, if set, copies each backup to a temporary file there first,
	// so the journal's read transaction lasts only as long as a local copy:
	// a slow client then cannot hold up appends that need the file to grow
	// (see journal.Snapshot). Empty means the backup streams straight from
	// the transaction.
	SpoolDir string
	// RefundsPaused, if set, is asked on every new refund request (POST
	// /v1/reservations/{id}/refunds); a non-empty answer refuses it with
	// 503 "unavailable" and that answer as the message. refundd pauses
	// refunds so while it reconciles a restored journal. Nil means never.
	RefundsPaused func() string
}

// AuditJournal is what the audit routes need from the journal;
// *journal.DB implements it. Implementations must be safe for concurrent
// use; errors are reported to clients as 503 without detail.
type AuditJournal interface {
	ChainHead(ctx context.Context) (journal.Checkpoint, error)
	LastCheckpoint(ctx context.Context) (journal.Checkpoint, bool, error)
	Epoch(ctx context.Context) (uint64, error)
	ReconcileRequired(ctx context.Context) (*journal.RestoreInfo, error)
	// Snapshot starts a hot backup; the caller closes it.
	Snapshot(ctx context.Context) (*journal.Snapshot, error)
}

// ArchiveJournal is an AuditJournal with archive segments (*journal.DB;
// the PostgreSQL journal does not archive). Segments and manifests never
// change once written, and archival needs the journal's file lock, so a
// running server's files are the ones any hot backup of it names.
type ArchiveJournal interface {
	ArchivedSegments() ([]journal.AppliedSegment, error)
	ArchiveDir() string
}

// Backup response headers: the chain head the copy holds, so the client
// can check the file it received (refundctl backup does).
const (
	HeaderHeadGlobal = "X-Refundd-Head-Global"
	HeaderHeadHash   = "X-Refundd-Head-Hash"
	HeaderEpoch      = "X-Refundd-Epoch"
)

// refundRequestRoute is the path template of new refund requests, the
// route RefundsPaused gates.
const refundRequestRoute = "/v1/reservations/{id}/refunds"

// auditPerms are the audit routes' permissions, added to Options.RoutePerms
// (unless the caller set them) so that the deny-by-default table admits
// them.
var auditPerms = map[string]auth.Permission{
	"GET /v1/audit/head":           auth.PermAudit,
	"GET /v1/admin/backup":         auth.PermOperate,
	"GET /v1/admin/archive/{file}": auth.PermOperate,
}

// auditRoutes registers the audit routes when Options.Audit is set.
func (s *Server) auditRoutes() {
	cfg := s.opts.Audit
	if cfg == nil || cfg.Journal == nil {
		return
	}
	perms := maps.Clone(s.opts.RoutePerms)
	if perms == nil {
		perms = map[string]auth.Permission{}
	}
	for k, p := range auditPerms {
		if _, ok := perms[k]; !ok {
			perms[k] = p
		}
	}
	s.opts.RoutePerms = perms
	s.router.HandleFunc("/v1/audit/head", s.auditHead).Methods(http.MethodGet)
	s.router.HandleFunc("/v1/admin/backup", s.adminBackup).Methods(http.MethodGet)
	s.router.HandleFunc("/v1/admin/archive/{file}", s.adminArchiveFile).Methods(http.MethodGet)
}

// HeadView is the body of GET /v1/audit/head.
type HeadView struct {
	// Head is the last record's global and chain hash, timed now.
	Head journal.Checkpoint `json:"head"`
	// Checkpoint is the newest checkpoint stored in the journal.
	Checkpoint        *journal.Checkpoint  `json:"checkpoint,omitempty"`
	Epoch             uint64               `json:"epoch"`
	ReconcileRequired bool                 `json:"reconcile_required"`
	Restore           *journal.RestoreInfo `json:"restore,omitempty"` // the restore being reconciled
}

func (s *Server) auditHead(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	j := s.opts.Audit.Journal
	var v HeadView
	var err error
	if v.Head, err = j.ChainHead(ctx); err != nil {
		s.journalError(w, r, "audit head", err)
		return
	}
	cp, ok, err := j.LastCheckpoint(ctx)
	if err != nil {
		s.journalError(w, r, "audit head", err)
		return
	}
	if ok {
		v.Checkpoint = &cp
	}
	if v.Epoch, err = j.Epoch(ctx); err != nil {
		s.journalError(w, r, "audit head", err)
		return
	}
	if v.Restore, err = j.ReconcileRequired(ctx); err != nil {
		s.journalError(w, r, "audit head", err)
		return
	}
	v.ReconcileRequired = v.Restore != nil
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) journalError(w http.ResponseWriter, r *http.Request, what string, err error) {
	s.log.ErrorContext(r.Context(), what+" failed", "err", err)
	writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: errorDetail{Code: codeUnavailable, Message: "the journal is unavailable"}})
}

// adminBackup streams a consistent copy of the journal file with its
// exact Content-Length.
func (s *Server) adminBackup(w http.ResponseWriter, r *http.Request) {
	cfg := s.opts.Audit
	timeout := s.extendWriteDeadline(w, r, "backup")
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	start := time.Now()
	snap, err := cfg.Journal.Snapshot(ctx)
	if err != nil {
		s.journalError(w, r, "backup", err)
		return
	}
	defer snap.Close()
	// Everything else about the copy comes from the snapshot itself: a
	// second read of the journal while it is open can deadlock with a
	// commit that must remap the file (journal.Snapshot.Epoch).
	head, epoch := snap.Head(), snap.Epoch()
	size, body := snap.Size(), io.WriterTo(snap)
	if cfg.SpoolDir != "" {
		f, n, err := spool(cfg.SpoolDir, snap)
		if err != nil {
			s.journalError(w, r, "backup spool", err)
			return
		}
		defer func() { f.Close(); os.Remove(f.Name()) }()
		_ = snap.Close() // the copy is made: let appends remap again
		size, body = n, fileWriterTo{f}
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="refundd-%d.db"`, head.Global))
	h.Set("Cache-Control", "no-store")
	h.Set(HeaderHeadGlobal, strconv.FormatUint(head.Global, 10))
	h.Set(HeaderHeadHash, head.Hash.String())
	h.Set(HeaderEpoch, strconv.FormatUint(epoch, 10))
	w.WriteHeader(http.StatusOK)
	n, err := body.WriteTo(w)
	if err != nil || n != size {
		s.log.WarnContext(r.Context(), "backup not completed", "global", head.Global, "sent", n, "size", size, "err", err)
		// The status is out; breaking the connection is the only way to
		// tell the client its copy is incomplete (besides the length).
		panic(http.ErrAbortHandler)
	}
	s.log.InfoContext(r.Context(), "backup sent", "global", head.Global, "bytes", n, "elapsed", time.Since(start))
}

// adminArchiveFile serves one file of the journal's archive: only a name
// the journal records (a segment or its manifest), never a path.
func (s *Server) adminArchiveFile(w http.ResponseWriter, r *http.Request) {
	name := pathVars(r)["file"]
	notFound := &apiError{code: string(reservation.CodeNotFound), msg: "the journal's archive has no file " + strconv.Quote(name)}
	aj, ok := s.opts.Audit.Journal.(ArchiveJournal)
	if !ok {
		s.writeError(w, r, notFound)
		return
	}
	segs, err := aj.ArchivedSegments()
	if err != nil {
		s.journalError(w, r, "archive file", err)
		return
	}
	known := slices.ContainsFunc(segs, func(a journal.AppliedSegment) bool { return a.Segment == name || a.Manifest == name })
	if !known || filepath.Base(name) != name {
		s.writeError(w, r, notFound)
		return
	}
	f, err := os.Open(filepath.Join(aj.ArchiveDir(), name))
	if err != nil {
		s.journalError(w, r, "archive file", err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		s.journalError(w, r, "archive file", err)
		return
	}
	s.extendWriteDeadline(w, r, "archive file")
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	http.ServeContent(w, r, name, st.ModTime(), f)
}

// extendWriteDeadline gives a file download AuditConfig.BackupTimeout
// (default 10 minutes) to be written, since the server's write deadline is
// sized for small JSON answers, and returns that timeout.
func (s *Server) extendWriteDeadline(w http.ResponseWriter, r *http.Request, what string) time.Duration {
	timeout := s.opts.Audit.BackupTimeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		s.log.WarnContext(r.Context(), what+": cannot extend the write deadline; a large file may be cut off", "err", err)
	}
	return timeout
}

// spool copies the snapshot to a temporary file in dir, positioned at its
// start.
func spool(dir string, snap *journal.Snapshot) (*os.File, int64, error) {
	f, err := os.CreateTemp(dir, "refundd-backup-*.db")
	if err != nil {
		return nil, 0, err
	}
	n, err := snap.WriteTo(f)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, 0, err
	}
	return f, n, nil
}

type fileWriterTo struct{ f *os.File }

func (w fileWriterTo) WriteTo(dst io.Writer) (int64, error) { return io.Copy(dst, w.f) }

// refundsPaused answers new refund requests (POST on the route template
// tpl) with 503 while AuditConfig.RefundsPaused says so, and reports
// whether it did. Everything else passes: reads, registrations, operator
// actions and provider notifications go on.
func (s *Server) refundsPaused(w http.ResponseWriter, r *http.Request, tpl string) bool {
	if s.opts.Audit == nil || s.opts.Audit.Journal == nil || s.opts.Audit.RefundsPaused == nil ||
		r.Method != http.MethodPost || tpl != refundRequestRoute {
		return false
	}
	reason := s.opts.Audit.RefundsPaused()
	if reason == "" {
		return false
	}
	w.Header().Set("Retry-After", "30")
	s.writeErrorBody(w, http.StatusServiceUnavailable, errorDetail{Code: codeUnavailable, Message: reason})
	return true
}

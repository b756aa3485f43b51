package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/reservation"
)

// Tenancy: a token may be limited to some merchants (auth.Principal.Sees).
// For such a token every route answers about another merchant's
// reservation, refund, event or parked webhook exactly as about one that
// does not exist; each route's rule is in routePerms (auth.go).

// scopeRule is how a route treats a token limited to some merchants.
type scopeRule int

const (
	// scopeRefused: the answer is about every merchant at once and cannot
	// be cut honestly (a backup, the audit head, webhook lag, notification
	// counters); scoped tokens get 403 merchant_scope. The zero value, so
	// that a route added without a rule is closed to scoped tokens.
	scopeRefused scopeRule = iota
	// scopeReservation: the reservation in the path; another merchant's
	// is answered as an unknown id (the scoped Engine).
	scopeReservation
	// scopeFiltered: a list or count that leaves other merchants out.
	scopeFiltered
	// scopeRegister: a registration may name only the token's merchants;
	// another is answered as a merchant that is not configured.
	scopeRegister
)

// codeMerchantScope refuses a route to a token limited to some merchants.
const codeMerchantScope = "merchant_scope"

var errMerchantScope = &apiError{code: codeMerchantScope,
	msg: "this token is limited to some merchants; this route answers about every merchant"}

// viewer is who the request is answered for: the authenticated principal,
// unscoped when requests are not authenticated.
func viewer(r *http.Request) auth.Principal {
	if st := stateOf(r); st != nil && st.hasPrincipal {
		return st.principal
	}
	return auth.Principal{}
}

// engineFor is the Engine as the request's principal sees it: the engine
// itself for an unscoped one.
func (s *Server) engineFor(r *http.Request) Engine {
	p := viewer(r)
	if !p.Scoped() {
		return s.engine
	}
	return &scopedEngine{Engine: s.engine, p: p}
}

// scopedEngine hides the reservations of merchants its principal does not
// see: they answer what an unknown id answers.
type scopedEngine struct {
	Engine
	p auth.Principal
}

func (e *scopedEngine) Get(ctx context.Context, id string) (*reservation.State, error) {
	st, err := e.Engine.Get(ctx, id)
	if err == nil && !e.p.Sees(st.Merchant) {
		return nil, reservation.ErrNotFound
	}
	return st, err
}

func (e *scopedEngine) Await(ctx context.Context, id string, done func(*reservation.State) bool) (*reservation.State, error) {
	if _, err := e.Get(ctx, id); err != nil {
		return nil, err
	}
	return e.Engine.Await(ctx, id, done)
}

// hidden reports whether id is a reservation the principal may not see,
// and if so the error an unknown id gets for cmd: the domain's own
// decision on an unregistered state, so that validation errors come
// first exactly as they do for an unknown id.
func (e *scopedEngine) hidden(ctx context.Context, id string, cmd reservation.Command) (bool, error) {
	st, err := e.Engine.Get(ctx, id)
	if err != nil || e.p.Sees(st.Merchant) {
		return false, nil // unknown or unavailable: the engine answers
	}
	if _, derr := reservation.Decide(&reservation.State{}, cmd, reservation.Env{}); derr != nil {
		return true, derr
	}
	return true, reservation.ErrNotFound
}

func (e *scopedEngine) Execute(ctx context.Context, id, by string, cmd reservation.Command) (*reservation.State, []reservation.Event, error) {
	if _, ok := cmd.(reservation.Register); !ok {
		if hidden, err := e.hidden(ctx, id, cmd); hidden {
			return nil, nil, err
		}
	}
	st, events, err := e.Engine.Execute(ctx, id, by, cmd)
	if err == nil && !e.p.Sees(st.Merchant) {
		// A registration names a merchant the principal sees, and another
		// merchant's id is a conflict; this only guards that.
		return nil, nil, reservation.ErrConflict
	}
	return st, events, err
}

func (e *scopedEngine) Abandon(ctx context.Context, id, by string, c reservation.Abandon) (*reservation.State, []reservation.Event, error) {
	if hidden, err := e.hidden(ctx, id, c); hidden {
		return nil, nil, err
	}
	return e.Engine.Abandon(ctx, id, by, c)
}

// Attention returns up to limit refunds of seen merchants, reading on past
// hidden ones, so that a page is full whenever the unscoped index would
// have had that many of them: hidden refunds leave no gap or short page.
func (e *scopedEngine) Attention(ctx context.Context, kind, after string, limit int) ([]reservation.RefundRef, error) {
	var out []reservation.RefundRef
	for {
		refs, err := e.Engine.Attention(ctx, kind, after, limit)
		if err != nil {
			return nil, err
		}
		for _, ref := range refs {
			st, err := e.Engine.Get(ctx, ref.ReservationID)
			if err != nil {
				return nil, err
			}
			if e.p.Sees(st.Merchant) {
				if out = append(out, ref); len(out) == limit {
					return out, nil
				}
			}
		}
		if len(refs) < limit {
			return out, nil
		}
		last := refs[len(refs)-1]
		after = last.ReservationID + "/" + last.RefundNo
	}
}

// CheckScopes fails when a token is limited to a merchant that is not
// among merchants (Options.Merchants; empty means the single default one):
// such a token would silently see nothing.
func CheckScopes(ts *auth.Tokens, merchants []string) error {
	if len(merchants) == 0 {
		merchants = []string{reservation.DefaultMerchant}
	}
	for _, m := range ts.Merchants() {
		if !slices.Contains(merchants, m) {
			return fmt.Errorf("%w: a token is limited to merchant %q, which is not configured", auth.ErrConfig, m)
		}
	}
	return nil
}

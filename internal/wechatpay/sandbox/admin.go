package sandbox

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Admin routes, for tests and development only (unauthenticated):
//
//	POST   /sandbox/orders                 {"out_trade_no":"O1","transaction_id":"(optional)","total":10000}
//	                                       -> 201 new, 200 already registered identically, 409 conflict
//	GET    /sandbox/orders/{out_trade_no}  -> {"out_trade_no","transaction_id","total","refunded","refunds":[...]}
//	POST   /sandbox/faults                 a Fault as JSON, Delay as a Go duration string:
//	                                       {"kind":"system_error","out_refund_no":"R1","op":"create","count":1}
//	                                       {"kind":"delay","out_trade_no":"O1","delay":"3s"}
//	                                       {"kind":"outcome","out_trade_no":"O1","outcome":"CLOSED"}
//	                                       {"kind":"notify_duplicate","repeat":2,"delay":"500ms"} -> 201
//	GET    /sandbox/faults                 -> [faults in force]
//	DELETE /sandbox/faults                 -> 204, removes all
//	GET    /sandbox/refunds/{out_refund_no} -> {"refund":RefundRecord,"deliveries":[Delivery...]}
//	GET    /sandbox/creates                -> CreateRate: create requests per second, max, refused
//	...    /sandbox/credentials[/...]       platform certificates, public keys, APIv3 key (adminCredentials)
//
// Errors are {"code":"...","message":"..."} with 400, 404, 405 or 409, or
// 500 when a new order cannot be saved to Config.StateFile.

// faultJSON is Fault on the wire, with a readable delay.
type faultJSON struct {
	Fault
	Delay string `json:"delay,omitempty"`
}

type orderJSON struct {
	OutTradeNo    string   `json:"out_trade_no"`
	TransactionID string   `json:"transaction_id,omitempty"`
	Total         int64    `json:"total"`
	Refunded      int64    `json:"refunded"`
	Refunds       []string `json:"refunds"`
}

func (s *Server) handleAdmin(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.EscapedPath(), adminPrefix)
	if rest == "credentials" || strings.HasPrefix(rest, "credentials/") {
		s.adminCredentials(w, r, rest)
		return
	}
	coll, id, hasID := strings.Cut(rest, "/")
	if hasID {
		var err error
		if id, err = url.PathUnescape(id); err != nil || id == "" || strings.Contains(id, "/") {
			adminError(w, http.StatusNotFound, "NOT_FOUND", "no such admin route")
			return
		}
	}
	route := r.Method + " " + coll
	if hasID {
		route += "/{id}"
	}
	switch route {
	case "POST orders":
		s.adminCreateOrder(w, r)
	case "GET orders/{id}":
		s.adminGetOrder(w, id)
	case "POST faults":
		s.adminSetFault(w, r)
	case "GET creates":
		adminJSON(w, http.StatusOK, s.CreateRate())
	case "GET faults":
		out := []faultJSON{}
		for _, f := range s.Faults() {
			out = append(out, toFaultJSON(f))
		}
		adminJSON(w, http.StatusOK, out)
	case "DELETE faults":
		s.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	case "GET refunds/{id}":
		rec, ok := s.Refund(id)
		if !ok {
			adminError(w, http.StatusNotFound, "RESOURCE_NOT_EXISTS", "no refund "+id)
			return
		}
		d := s.Deliveries(id)
		if d == nil {
			d = []Delivery{}
		}
		adminJSON(w, http.StatusOK, struct {
			Refund     RefundRecord `json:"refund"`
			Deliveries []Delivery   `json:"deliveries"`
		}{rec, d})
	default:
		switch coll {
		case "orders", "faults", "refunds":
			adminError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", r.Method+" not allowed here")
		default:
			adminError(w, http.StatusNotFound, "NOT_FOUND", "no such admin route")
		}
	}
}

func (s *Server) adminCreateOrder(w http.ResponseWriter, r *http.Request) {
	var in orderJSON
	if !decodeAdmin(w, r, &in) {
		return
	}
	txn, created, err := s.createOrder(in.OutTradeNo, in.TransactionID, in.Total)
	switch {
	case errors.Is(err, ErrOrderConflict):
		adminError(w, http.StatusConflict, "ORDER_CONFLICT", err.Error())
		return
	case errors.Is(err, ErrStateFile):
		adminError(w, http.StatusInternalServerError, "SYSTEM_ERROR", err.Error())
		return
	case err != nil:
		adminError(w, http.StatusBadRequest, "PARAM_ERROR", err.Error())
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	o, _ := s.orderJSON(in.OutTradeNo)
	o.TransactionID = txn
	adminJSON(w, status, o)
}

func (s *Server) adminGetOrder(w http.ResponseWriter, outTradeNo string) {
	o, ok := s.orderJSON(outTradeNo)
	if !ok {
		adminError(w, http.StatusNotFound, "RESOURCE_NOT_EXISTS", "no order "+outTradeNo)
		return
	}
	adminJSON(w, http.StatusOK, o)
}

func (s *Server) orderJSON(outTradeNo string) (orderJSON, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[outTradeNo]
	if !ok {
		return orderJSON{}, false
	}
	return orderJSON{OutTradeNo: o.outTradeNo, TransactionID: o.transactionID, Total: o.total, Refunded: o.held,
		Refunds: append([]string{}, o.refundNos...)}, true
}

func (s *Server) adminSetFault(w http.ResponseWriter, r *http.Request) {
	var in faultJSON
	if !decodeAdmin(w, r, &in) {
		return
	}
	f := in.Fault
	if in.Delay != "" {
		d, err := time.ParseDuration(in.Delay)
		if err != nil {
			adminError(w, http.StatusBadRequest, "PARAM_ERROR", "delay is not a Go duration such as 1.5s")
			return
		}
		f.Delay = d
	}
	if err := s.SetFault(f); err != nil {
		adminError(w, http.StatusBadRequest, "PARAM_ERROR", err.Error())
		return
	}
	adminJSON(w, http.StatusCreated, toFaultJSON(f))
}

func toFaultJSON(f Fault) faultJSON {
	out := faultJSON{Fault: f}
	if f.Delay > 0 {
		out.Delay = f.Delay.String()
	}
	return out
}

func decodeAdmin(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBodySize))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		adminError(w, http.StatusBadRequest, "PARAM_ERROR", "body is not the expected JSON object: "+err.Error())
		return false
	}
	return true
}

func adminJSON(w http.ResponseWriter, status int, v any) {
	body, err := marshalJSON(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"code":"SYSTEM_ERROR","message":"marshal"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

func adminError(w http.ResponseWriter, status int, code, msg string) {
	adminJSON(w, status, struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{code, msg})
}

package reservation

import (
	"strconv"
	"strings"
)

// RefundNo builds the out_refund_no of a reservation's nth refund:
// PREFIX-RESERVATION-N. The prefix has no '-', and N is the last segment, so
// the three parts can be read back unambiguously: two different
// (prefix, reservation, n) never give the same number. The result is at most
// 16+1+40+1+2 = 60 characters of [0-9A-Za-z_-], inside WeChat's 64.
//
// It is called once, when the refund is requested; the number is then stored
// in the event and never recomputed.
func RefundNo(prefix, reservationID string, n int) string {
	return prefix + "-" + reservationID + "-" + strconv.Itoa(n)
}

// ParseRefundNo splits a number made by RefundNo.
func ParseRefundNo(no string) (prefix, reservationID string, n int, ok bool) {
	i := strings.IndexByte(no, '-')
	j := strings.LastIndexByte(no, '-')
	if i <= 0 || j <= i+1 {
		return "", "", 0, false
	}
	n, err := strconv.Atoi(no[j+1:])
	if err != nil || n < 1 || strconv.Itoa(n) != no[j+1:] {
		return "", "", 0, false
	}
	prefix, reservationID = no[:i], no[i+1:j]
	if !validPrefix(prefix) || !ValidReservationID(reservationID) {
		return "", "", 0, false
	}
	return prefix, reservationID, n, true
}

// ValidRefundNo reports whether s could be any out_refund_no (WeChat's rule:
// 1..64 of [0-9A-Za-z_-]).
func ValidRefundNo(s string) bool { return isToken(s, 64) }

func validPrefix(p string) bool {
	return isToken(p, 16) && !strings.ContainsRune(p, '-') && !strings.ContainsRune(p, '_')
}

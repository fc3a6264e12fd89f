package ferry

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// newIdempotencyKey is a UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then random bits, so
// keys WithAutoIdempotencyKeys makes are unique and sort by time as the broker's message ids do.
func newIdempotencyKey() string {
	var u [16]byte
	rand.Read(u[:]) //nolint:errcheck // crypto/rand.Read never fails (Go 1.24)
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(time.Now().UnixMilli()))
	copy(u[:6], ms[2:])
	u[6] = 0x70 | u[6]&0x0f // version 7
	u[8] = 0x80 | u[8]&0x3f // variant 10
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}

package journal

// The checks Append, Lookup and the kv area make before anything reaches
// storage, exported so that another journal (journal/pgjournal) accepts
// exactly the requests this one does.

// ValidateRequest checks everything about req that does not depend on
// stored state, as Append does, and fills each Due's empty Stream with
// req.Stream (in a copy of req.Dues: the caller's slice is not changed).
// Failures wrap ErrInvalid.
func ValidateRequest(req *AppendRequest) error { return validate(req) }

// ValidateStream checks a stream name: 1..128 bytes without NUL.
func ValidateStream(stream string) error { return checkStream(stream) }

// ValidateClaim checks a claim's namespace (1..64 bytes, no NUL) and key
// (1..1024 bytes).
func ValidateClaim(c Claim) error { return checkClaim(c) }

// ValidateKVKey checks a kv key: 1..1024 bytes.
func ValidateKVKey(key string) error { return checkKVKey(key) }

// MaxKVValue is the largest kv value, in bytes.
const MaxKVValue = maxKVValueLen

// ValidateCounter checks a counter change's key: 1..128 bytes without NUL.
func ValidateCounter(c Counter) error { return checkCounter(c) }

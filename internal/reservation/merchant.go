package reservation

// DefaultMerchant is the name of the merchant of a deployment that
// configures a single one, and of every reservation registered before
// reservations had merchants (their Registered events name none).
const DefaultMerchant = "default"

// MerchantOf is the merchant a registration or event names: name, or
// DefaultMerchant when it names none.
func MerchantOf(name string) string {
	if name == "" {
		return DefaultMerchant
	}
	return name
}

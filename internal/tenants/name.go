package tenants

// ValidName reports whether a tenant name is safe as one path element,
// the directory of the tenant's runs: the keys file allows
// [a-z0-9][a-z0-9_.-]*, at most 63 bytes.
func ValidName(t string) bool {
	if t == "" || len(t) > 63 || t == "." || t == ".." {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '_' || c == '.' || c == '-')) {
			return false
		}
	}
	return true
}

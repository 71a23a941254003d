package auth

import "fmt"

// Role is what a key may do. The roles nest: admin ⊇ write ⊇ read.
type Role string

// The roles, from most to least privileged.
const (
	// RoleAdmin may do everything write may, plus what removes its
	// tenant's history (DELETE /v1/runs/{id}). It is still its tenant's:
	// no key sees another tenant's runs.
	RoleAdmin Role = "admin"
	// RoleWrite may create, cancel and drive its tenant's runs, and read them.
	RoleWrite Role = "write"
	// RoleRead may only read its tenant's runs and stream their events.
	RoleRead Role = "read"
)

// rank orders the roles; 0 is not a role.
func (r Role) rank() int {
	switch r {
	case RoleRead:
		return 1
	case RoleWrite:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Valid reports whether r is one of the three roles.
func (r Role) Valid() bool { return r.rank() > 0 }

// Allows reports whether a key of role r may do what needs role needed.
// A role that is not one of the three allows nothing and is allowed by
// nothing, so a zero Role fails closed.
func (r Role) Allows(needed Role) bool {
	return r.Valid() && needed.Valid() && r.rank() >= needed.rank()
}

// ParseRole returns the role named s ("admin", "write" or "read"; exact,
// lowercase), or an error.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if !r.Valid() {
		return "", fmt.Errorf("role %q: want admin, write or read", s)
	}
	return r, nil
}

package httpapi

// Small converters between the generated API types (optional fields as
// pointers, ids as int) and the domain's (zero values, ids as int64).

// deref is the value p points to, or T's zero value when p is nil (an
// optional field the client left out).
func deref[T any](p *T) T {
	var v T
	if p != nil {
		v = *p
	}
	return v
}

// convert maps every element of in with f.
func convert[T, U any](in []T, f func(T) U) []U {
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

func int64Ptr(v *int) *int64 {
	if v == nil {
		return nil
	}
	x := int64(*v)
	return &x
}

// int64s converts an optional list of ids; nil stays nil.
func int64s(v *[]int) []int64 {
	if v == nil {
		return nil
	}
	return convert(*v, func(x int) int64 { return int64(x) })
}

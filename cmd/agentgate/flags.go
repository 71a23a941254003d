package main

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// secondsFlag is a whole number of seconds, given as such (900) or as a
// duration (15m, rounded up to the second).
type secondsFlag struct{ n *int }

func (s secondsFlag) String() string {
	if s.n == nil || *s.n == 0 {
		return ""
	}
	return strconv.Itoa(*s.n) + "s"
}

func (s secondsFlag) Set(v string) error {
	if n, err := strconv.Atoi(v); err == nil {
		if n <= 0 {
			return errors.New("must be positive")
		}
		*s.n = n
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return errors.New("want seconds or a duration such as 90s or 15m")
	}
	*s.n = int((d + time.Second - 1) / time.Second)
	return nil
}

// mapFlag collects KEY=VALUE pairs.
type mapFlag struct{ m *map[string]string }

func (f mapFlag) String() string { return "" }

func (f mapFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return errors.New("want KEY=VALUE")
	}
	if *f.m == nil {
		*f.m = map[string]string{}
	}
	(*f.m)[k] = val
	return nil
}

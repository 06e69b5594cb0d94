package main

import (
	"errors"
	"net/url"
	"regexp"
)

// redactURL hides the password of a URL (or of a key=value connection string).
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			return u.String()
		}
	}
	return kvPassword.ReplaceAllString(s, "${1}xxxxx")
}

var kvPassword = regexp.MustCompile(`(password=)\S+`)
var urlPassword = regexp.MustCompile(`(://[^:/@\s]+:)[^@\s]+@`)

// redactErr hides URL passwords that a driver may have put in an error.
func redactErr(err error) error {
	if err == nil {
		return nil
	}
	s := err.Error()
	r := urlPassword.ReplaceAllString(s, "${1}xxxxx@")
	r = kvPassword.ReplaceAllString(r, "${1}xxxxx")
	if r == s {
		return err
	}
	return errors.New(r)
}

// Command validation_oracle asks Go itself how kube's name validation answers a list of strings.
//
// kubelab's validators (kubelab/validation.py) must answer exactly as apimachinery's
// pkg/util/validation does, and Python's regular expressions differ from Go's RE2 in ways that matter
// for security: Python's `$` also matches before a trailing newline, `\d` and `\w` take non-ASCII
// digits and letters, and Go's len() counts bytes. This program is the oracle: it compiles kube's
// patterns (the pattern strings below are data, copied from apimachinery v1.32) with Go's regexp,
// applies kube's length and character rules with Go's string semantics, and prints, for every input
// string, what each check says. It uses only the standard library and is run once, by
// scripts/gen_validation_corpus.py, to make the fixture tests/unit/fixtures/validation_go_corpus.json;
// the tests then need no Go.
//
//	go run scripts/validation_oracle.go < strings.json > verdicts.json
//
// Input: a JSON array of strings. Output: a JSON object {"go": version, "patterns": {name: pattern},
// "verdicts": [{"quoted": ..., "matches": {...}, "errors": {...}, "parses": {...}}]}, one verdict per
// input, in order.
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
)

// The `...Fmt` constants of apimachinery's pkg/util/validation/validation.go (v1.32).
const (
	dns1123LabelFmt     = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
	dns1123SubdomainFmt = dns1123LabelFmt + "(\\." + dns1123LabelFmt + ")*"
	dns1035LabelFmt     = "[a-z]([-a-z0-9]*[a-z0-9])?"
	qualifiedNameFmt    = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
	labelValueFmt       = "(" + qualifiedNameFmt + ")?"
	portNameCharsetFmt  = "[-a-z0-9]+"
	portNameLetterFmt   = "[a-z]"
	configMapKeyFmt     = "[-._a-zA-Z0-9]+"
)

// Anchored as kube anchors them ("^" + fmt + "$"), except the one-letter rule, which kube searches for.
var patterns = map[string]string{
	"dns1123Label":      "^" + dns1123LabelFmt + "$",
	"dns1123Subdomain":  "^" + dns1123SubdomainFmt + "$",
	"dns1035Label":      "^" + dns1035LabelFmt + "$",
	"qualifiedName":     "^" + qualifiedNameFmt + "$",
	"labelValue":        "^" + labelValueFmt + "$",
	"portNameCharset":   "^" + portNameCharsetFmt + "$",
	"portNameOneLetter": portNameLetterFmt,
	"configMapKey":      "^" + configMapKeyFmt + "$",
}

var compiled = map[string]*regexp.Regexp{}

func matches(name, value string) bool { return compiled[name].MatchString(value) }

// The messages kubelab words as kube-apiserver v1.32 does; regexError is apimachinery's RegexError.
func regexError(msg, format string, examples ...string) string {
	msg += " (e.g. "
	for i, example := range examples {
		if i > 0 {
			msg += " or "
		}
		msg += "'" + example + "', "
	}
	return msg + "regex used for validation is '" + format + "')"
}

func maxLen(n int) string { return fmt.Sprintf("must be no more than %d characters", n) }

var (
	dns1123LabelMsg = regexError("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "+
		"or '-', and must start and end with an alphanumeric character", dns1123LabelFmt, "my-name", "123-abc")
	dns1123SubdomainMsg = regexError("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "+
		"characters, '-' or '.', and must start and end with an alphanumeric character", dns1123SubdomainFmt,
		"example.com")
	dns1035LabelMsg = regexError("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "+
		"start with an alphabetic character, and end with an alphanumeric character", dns1035LabelFmt,
		"my-name", "abc-123")
	qualifiedNameErr = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with " +
		"an alphanumeric character"
	labelValueMsg = regexError("a valid label must be an empty string or consist of alphanumeric characters, "+
		"'-', '_' or '.', and must start and end with an alphanumeric character", labelValueFmt, "MyValue",
		"my_value", "12345")
	configMapKeyMsg = regexError("a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
		configMapKeyFmt, "key.name", "KEY_NAME", "key-name")
)

// lengthAndPattern is the shape of IsDNS1123Label, IsDNS1123Subdomain, IsDNS1035Label, IsValidLabelValue:
// the byte length first, then the pattern.
func lengthAndPattern(value string, limit int, pattern, msg string) []string {
	errs := []string{}
	if len(value) > limit {
		errs = append(errs, maxLen(limit))
	}
	if !matches(pattern, value) {
		errs = append(errs, msg)
	}
	return errs
}

func qualifiedName(value string) []string {
	errs := []string{}
	parts := strings.Split(value, "/")
	var name string
	switch len(parts) {
	case 1:
		name = parts[0]
	case 2:
		prefix := parts[0]
		name = parts[1]
		if len(prefix) == 0 {
			errs = append(errs, "prefix part must be non-empty")
		} else {
			for _, msg := range lengthAndPattern(prefix, 253, "dns1123Subdomain", dns1123SubdomainMsg) {
				errs = append(errs, "prefix part "+msg)
			}
		}
	default:
		return append(errs, "a qualified name "+regexError(qualifiedNameErr, qualifiedNameFmt, "MyName", "my.name",
			"123-abc")+" with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")
	}
	if len(name) == 0 {
		errs = append(errs, "name part must be non-empty")
	} else if len(name) > 63 {
		errs = append(errs, "name part "+maxLen(63))
	}
	if !matches("qualifiedName", name) {
		errs = append(errs, "name part "+regexError(qualifiedNameErr, qualifiedNameFmt, "MyName", "my.name", "123-abc"))
	}
	return errs
}

func portName(value string) []string {
	errs := []string{}
	if len(value) > 15 {
		errs = append(errs, maxLen(15))
	}
	if !matches("portNameCharset", value) {
		errs = append(errs, "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
	}
	if !matches("portNameOneLetter", value) {
		errs = append(errs, "must contain at least one letter (a-z)")
	}
	if strings.Contains(value, "--") {
		errs = append(errs, "must not contain consecutive hyphens")
	}
	if len(value) > 0 && (value[0] == '-' || value[len(value)-1] == '-') {
		errs = append(errs, "must not begin or end with a hyphen")
	}
	return errs
}

func configMapKey(value string) []string {
	errs := lengthAndPattern(value, 253, "configMapKey", configMapKeyMsg)
	switch {
	case value == ".":
		errs = append(errs, "must not be '.'")
	case value == "..":
		errs = append(errs, "must not be '..'")
	case strings.HasPrefix(value, ".."):
		errs = append(errs, "must not start with '..'")
	}
	return errs
}

type verdict struct {
	Quoted  string              `json:"quoted"`
	Matches map[string]bool     `json:"matches"`
	Errors  map[string][]string `json:"errors"`
	Parses  map[string]bool     `json:"parses"`
}

func judge(value string) verdict {
	// How field.Error prints a bad string value (%q: strconv.Quote).
	v := verdict{Quoted: strconv.Quote(value), Matches: map[string]bool{}, Errors: map[string][]string{},
		Parses: map[string]bool{}}
	for name := range patterns {
		v.Matches[name] = matches(name, value)
	}
	v.Errors["dns1123Label"] = lengthAndPattern(value, 63, "dns1123Label", dns1123LabelMsg)
	v.Errors["dns1123Subdomain"] = lengthAndPattern(value, 253, "dns1123Subdomain", dns1123SubdomainMsg)
	v.Errors["dns1035Label"] = lengthAndPattern(value, 63, "dns1035Label", dns1035LabelMsg)
	v.Errors["labelValue"] = lengthAndPattern(value, 63, "labelValue", labelValueMsg)
	v.Errors["qualifiedName"] = qualifiedName(value)
	// ValidateAnnotations checks the lower-cased key: strings.ToLower maps 'K' (Kelvin) to 'k'.
	v.Errors["annotationKey"] = qualifiedName(strings.ToLower(value))
	v.Errors["portName"] = portName(value)
	v.Errors["configMapKey"] = configMapKey(value)
	v.Parses["ip"] = net.ParseIP(value) != nil
	_, _, err := net.ParseCIDR(value)
	v.Parses["cidr"] = err == nil
	_, err = strconv.ParseInt(value, 10, 64)
	v.Parses["int64"] = err == nil
	return v
}

func main() {
	for name, pattern := range patterns {
		compiled[name] = regexp.MustCompile(pattern)
	}
	var inputs []string
	if err := json.NewDecoder(os.Stdin).Decode(&inputs); err != nil {
		fmt.Fprintln(os.Stderr, "reading the JSON list of strings:", err)
		os.Exit(2)
	}
	out := struct {
		Go       string            `json:"go"`
		Patterns map[string]string `json:"patterns"`
		Verdicts []verdict         `json:"verdicts"`
	}{Go: runtime.Version(), Patterns: patterns}
	for _, value := range inputs {
		out.Verdicts = append(out.Verdicts, judge(value))
	}
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetIndent("", "")
	if err := encoder.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

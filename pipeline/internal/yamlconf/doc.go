// Package yamlconf decodes a YAML document into a tree of tagged Go structs,
// keeping the file position of every value, and reports every problem as an
// [Error] that names file:line:col and the fix. The same struct tags drive
// [Reference], which renders the schema as Markdown, so the decoder and the
// documentation cannot disagree.
//
// A schema is a struct whose fields carry these tags:
//
//	yaml:"name"           the key in the YAML mapping (required on every field)
//	doc:"..."             what the field is for (required on every field)
//	required:"true"       the key must be present; required:"kafka,file" only
//	                      when the struct's kind (see below) is one of those
//	default:"1s"          the value used when the key is absent
//	enum:"a,b,c"          the only values a string accepts
//	kind:"true"           marks the string field that selects the struct's
//	                      kind; it needs an enum
//	kinds:"kafka,file"    the field applies only to those kinds
//	oneof:"true"          exactly one field so tagged is set in a mapping
//	example:"..."         an example value for the reference
//
// Field types are string, bool, int, int64, uint64, float64,
// [time.Duration], [Text], [Entries], structs, pointers to structs and
// slices of any of these. Scalars of every type may hold ${VAR}, replaced
// by the environment's value, and ${VAR:-default}; a variable the
// environment lacks is an error naming it. Values from the environment are never quoted in errors.
package yamlconf

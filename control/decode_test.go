package control_test

import "encoding/json"

func decode(body string, v any) error { return json.Unmarshal([]byte(body), v) }

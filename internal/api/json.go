package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// maxBodyBytes bounds every JSON request body.
const maxBodyBytes = 64 << 10

// writeJSON sets the content type before the status, then writes v.
func writeJSON(w http.ResponseWriter, status int, v any) {
	setJSONHeaders(w)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// setJSONHeaders sets the headers of every JSON answer. It does what Header.Set does
// without its work on every answer: the keys are canonical already, and the values are
// made once (a Header's values are replaced or appended to, never written in place, and
// with their capacity at their length an append copies them).
func setJSONHeaders(w http.ResponseWriter) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["X-Content-Type-Options"] = noSniff
}

var (
	jsonContentType = []string{"application/json; charset=utf-8"}
	noSniff         = []string{"nosniff"}
)

// decodeJSON reads exactly one JSON object of type T from the body: size-limited, with
// unknown fields and trailing data rejected, and an error that says what is wrong.
func decodeJSON[T any](w http.ResponseWriter, r *http.Request) (T, error) {
	var v T
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		return v, &apiError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
			Message: "Send the request body as application/json."}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, decodeError(err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) { // an object followed by padding past the limit
			return v, decodeError(err)
		}
		return v, errBadRequest("invalid_json", "The body must hold exactly one JSON object.")
	}
	return v, nil
}

func decodeError(err error) *apiError {
	var maxErr *http.MaxBytesError
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &maxErr):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
			Message: fmt.Sprintf("The body is larger than %d bytes.", maxBodyBytes)}
	case errors.Is(err, io.EOF):
		return errBadRequest("invalid_json", "The body is empty; send a JSON object.")
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return errBadRequest("invalid_json", "The body is not valid JSON.")
	case errors.As(err, &typeErr):
		return errBadRequest("invalid_json", fmt.Sprintf("The field %q has the wrong type.", typeErr.Field))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return errBadRequest("unknown_field", fmt.Sprintf("The field %s is not known here.", field))
	}
	return errBadRequest("invalid_json", "The body could not be read as JSON.")
}

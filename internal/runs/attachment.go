package runs

// Attachment is an image given with a prompt or a message, by the id of an
// uploaded file. An image sent inline (base64 in the request) is uploaded
// when the run or message is submitted, and referenced the same way.
type Attachment struct {
	FileID    string `json:"file_id"`
	MediaType string `json:"media_type"`
	Name      string `json:"name,omitempty"`
	Size      int64  `json:"size"`
	// SHA256 is the hex SHA-256 of the bytes: an inline image's is set as
	// it is decoded, so that two requests with other images are told
	// apart by their idempotency hash.
	SHA256 string `json:"sha256,omitempty"`
	// Data is an inline image's bytes, between the API and the upload at
	// submission; never stored with the spec.
	Data []byte `json:"-"`
}

// Image is an attachment as an adapter gets it: written to Path, under the
// run's temporary directory, and held in Data, so that an adapter passes
// whichever its CLI takes.
type Image struct {
	Path      string
	MediaType string
	Data      []byte
}

// ChangedFile is one file a run changed in its directory.
type ChangedFile struct {
	// Path is relative to the run's directory, with forward slashes.
	Path string `json:"path"`
	// Kind is ChangeAdd, ChangeUpdate or ChangeDelete.
	Kind string `json:"kind"`
	// Size is the file's size at the run's end (0 when deleted).
	Size int64 `json:"size"`
	// Binary says the diff names the file rather than showing it.
	Binary bool `json:"binary,omitempty"`
}

package format

// AsyncInputTag starts the operator entry of one input record of an
// asynchronous operator (stream.AsyncMap) whose result was not emitted
// when its checkpoint was taken: the restore issues its request again.
//
//	tag:byte record:rest
//
// record is the encoding of the operator's input codec.
const AsyncInputTag = 0x20

// EncodeAsyncInput encodes the entry of an input record encoded as record.
func EncodeAsyncInput(record []byte) []byte { return append([]byte{AsyncInputTag}, record...) }

// DecodeAsyncInput returns the encoded input record of an entry, sharing
// b's memory. Its error reads after "entry <i> is ".
func DecodeAsyncInput(b []byte) ([]byte, error) {
	if len(b) == 0 || b[0] != AsyncInputTag {
		return nil, malformed("not an asynchronous operator's input record: the checkpoint is corrupt, from an incompatible version, or of another operator under the same name")
	}
	return b[1:], nil
}

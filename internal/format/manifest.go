package format

import "github.com/exactlyonce/exactly/checkpoint"

// Manifest is the payload of the _manifest object of checkpoint storage on
// object storage: the owner, the id sequence and the completed checkpoints,
// in one object that every owner changes only with a conditional write
// (If-Match on the entity tag it last wrote). A process that lost
// ownership therefore cannot reserve an id, complete a checkpoint or renew
// its lease: its write fails.
type Manifest struct {
	// Incarnation is the random id created with the storage's first owner.
	Incarnation string `json:"incarnation"`
	// Epoch is the owner's epoch, higher than every earlier owner's.
	Epoch uint64 `json:"epoch"`
	// Token is random per acquisition: it tells this owner's own writes
	// from another's that happened to take the same epoch.
	Token string `json:"token"`
	// Holder describes the owning process.
	Holder string `json:"holder"`
	// Renewed is when the lease was last renewed, in Unix nanoseconds of
	// the owner's clock, for people: takeover compares no two machines'
	// clocks, and so never reads it.
	Renewed int64 `json:"renewed_unix_nano"`
	// LeaseNS is how long the lease lasts after a renewal, in nanoseconds.
	LeaseNS int64 `json:"lease_ns"`
	// Released is set when the owner gave the storage up.
	Released bool `json:"released"`
	// Reserved is the highest checkpoint or savepoint id ever reserved.
	Reserved checkpoint.ID `json:"reserved"`
	// Completed is the highest id that ever completed.
	Completed checkpoint.ID `json:"completed"`
	// Checkpoints are the retained completed checkpoints, increasing.
	Checkpoints []checkpoint.ID `json:"checkpoints"`
	// Savepoints are the completed savepoints, increasing.
	Savepoints []checkpoint.ID `json:"savepoints"`
	// Writes counts the writes of the manifest, so that no two writes have
	// the same contents (some servers' entity tags are content hashes).
	Writes uint64 `json:"writes"`
}

// EncodeManifest returns the contents of a _manifest object holding m: its
// JSON in an envelope.
func EncodeManifest(m Manifest) ([]byte, error) {
	return sealJSON(ManifestMagic, m)
}

// DecodeManifest decodes the contents b of the _manifest object at path.
func DecodeManifest(path string, b []byte) (Manifest, error) {
	var m Manifest
	if err := unsealJSON(path, ManifestMagic, b, "the manifest", &m); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

package source

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"

	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// The sources file keeps a realtime source's ps_auths passwords, which a
// restart with the database down needs to answer the routers'
// challenges, sealed: AES-256-GCM under a key derived from the source's
// connection string (its dsn_file's first line). Whoever can open them
// can read the dsn_file, and so the database's ps_auths already; the
// file alone (a backup, a copy of the state directory) shows none. A
// source without a connection string has no key: a password of its list
// is not written at all (no driver but realtime reads one).

// sealedPrefix starts a sealed value: the nonce and the ciphertext
// follow, in unpadded standard base64.
const sealedPrefix = "sealed:"

// errSealed is a sealed value that the source's connection string does
// not open: the dsn_file changed since the list was written, or the
// file was altered.
var errSealed = errors.New("the sources file's passwords were sealed under another connection string (dsn_file changed since)")

// secretOption reports whether an option of an object holds a secret.
func secretOption(o *pjsip.Object, kv pjsip.KeyValue) bool {
	return o.Type == "auth" && (kv.Key == "password" || kv.Key == "md5_cred")
}

// sealKey derives the AEAD of a source's connection string; nil when
// it has none.
func sealKey(dsn string) cipher.AEAD {
	if dsn == "" {
		return nil
	}
	key := sha256.Sum256([]byte("qualifyd sources file\x00" + dsn))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead
}

// sealList returns list with every secret sealed under aead (dropped
// when aead is nil), bound to the source's and the object's names; list
// itself is not modified.
func sealList(aead cipher.AEAD, source string, list []pjsip.Object) []pjsip.Object {
	return mapSecrets(list, func(o *pjsip.Object, v string) (string, error) {
		if aead == nil {
			return "", nil
		}
		nonce := make([]byte, aead.NonceSize())
		rand.Read(nonce)
		out := aead.Seal(nonce, nonce, []byte(v), []byte(source+"\x00"+o.Name))
		return sealedPrefix + base64.RawStdEncoding.EncodeToString(out), nil
	})
}

// openList returns list with every sealed secret opened with aead.
func openList(aead cipher.AEAD, source string, list []pjsip.Object) ([]pjsip.Object, error) {
	return mapSecretsErr(list, func(o *pjsip.Object, v string) (string, error) {
		text, ok := strings.CutPrefix(v, sealedPrefix)
		if !ok {
			return v, nil // written before sealing (version 1), or dropped
		}
		raw, err := base64.RawStdEncoding.DecodeString(text)
		if err != nil || aead == nil || len(raw) < aead.NonceSize() {
			return "", errSealed
		}
		plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(source+"\x00"+o.Name))
		if err != nil {
			return "", errSealed
		}
		return string(plain), nil
	})
}

// mapSecrets is mapSecretsErr of an f that never fails.
func mapSecrets(list []pjsip.Object, f func(o *pjsip.Object, v string) (string, error)) []pjsip.Object {
	out, _ := mapSecretsErr(list, f)
	return out
}

// mapSecretsErr returns list with f applied to every secret value,
// copying only the objects that hold one.
func mapSecretsErr(list []pjsip.Object, f func(o *pjsip.Object, v string) (string, error)) ([]pjsip.Object, error) {
	out := list
	copied := false
	for i := range list {
		o := &list[i]
		for j, kv := range o.Options {
			if !secretOption(o, kv) {
				continue
			}
			v, err := f(o, kv.Value)
			if err != nil {
				return nil, err
			}
			if !copied {
				out, copied = append([]pjsip.Object(nil), list...), true
			}
			if &out[i].Options[0] == &o.Options[0] {
				out[i].Options = append([]pjsip.KeyValue(nil), o.Options...)
			}
			out[i].Options[j].Value = v
		}
	}
	return out, nil
}

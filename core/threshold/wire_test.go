package threshold

import (
	"encoding/binary"
	"errors"
	"testing"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/polymsg"
	"encmatch/core/face/result"
)

// TestHugeLengthFieldsRefused: a length field of 2^36, in the envelope or
// in a chunk, is refused by every threshold decoder as corrupt data before
// anything is allocated from it (issue 14 item 1).
func TestHugeLengthFieldsRefused(t *testing.T) {
	fx := sharedFixture(t)
	huge := binary.LittleEndian.AppendUint64(nil, 1<<36)
	payloads := [][]byte{
		append(huge, 1, 2, 3),
		envelope.AppendChunk(nil, []byte(`{"party":1}`)),
		append(envelope.AppendChunk(nil, []byte(`{"party":1}`)), huge...),
	}
	in := fx.search(t, randomRows(1, 4, 40))
	p := *fx.set.CKKS.GetRLWEParameters()
	a := p.RingQ().AtLevel(0).NewPoly()
	for _, kind := range []string{KindShare, KindReceiverPublic, KindReceiverSecret, KindRound1, KindShamir, KindDecryptionShare,
		KindCiphertext, result.KindResult, KindSearch, KindJournal} {
		h := fx.cfg.header(kind)
		frames := [][]byte{}
		for _, pl := range payloads {
			frames = append(frames, envelope.Seal(h, pl))
		}
		lying := envelope.Seal(h, []byte{})
		binary.LittleEndian.PutUint64(lying[len(lying)-32-8:], 1<<36) // the envelope's payload length
		frames = append(frames, lying)
		for i, b := range frames {
			var err error
			switch kind {
			case KindShare:
				_, err = DecodeShare(b)
			case KindReceiverPublic:
				_, err = DecodeReceiverPublic(b)
			case KindReceiverSecret:
				_, err = decodeReceiverSecret(b, fx.recvPub)
			case KindRound1, KindShamir:
				err = decodeMessage(b, h, &partyHead{Party: 1}, polymsg.Q(p, &a))
			case KindDecryptionShare:
				_, _, err = fx.receiver.decodeShare(b, in, []int{0})
			case KindJournal:
				_, err = decodeJournal(b, h)
			default:
				_, err = DecodeInput(b, fx.cfg, fx.set)
			}
			if !errors.Is(err, errs.ErrCorrupt) {
				t.Errorf("%s, frame %d: got %v, want a corrupt-data error", kind, i, err)
			}
		}
	}
}

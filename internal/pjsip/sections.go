package pjsip

import "math"

// A million-AoR file is five million lines; what the reader keeps of them
// until the end of the read, and how, is the read's peak memory. Sections
// and their options live in shared blocks, and an option is the place of
// its line in the file's text.

// maxVars bounds the options of one section. Inheriting a section into
// itself doubles it; Asterisk loops forever on that, qualifyd stops here.
const maxVars = 1 << 16

// variable is one option line, key = value, with where it was written,
// as the builder reads it.
type variable struct {
	// name is the option as the reader looks it up (a wizard's "aor/"
	// prefix removed); key is as written, for errors.
	name, key string
	value     string
	file      string
	line      int
}

// option is one option line as a section keeps it until the end of the
// configuration: 16 bytes where a variable takes 72, as a million-AoR
// file keeps three million of them. It is where the line's
// text is in its file, split again into key and value when read
// (texts.option); or, for a line cut by a comment or a value grown by
// "+=", its place in texts.extra.
type option struct {
	// file indexes parser.files and texts.files; line is 1-based.
	file, line int32
	// off and n locate the line's text in the file; n is extra for an
	// option kept in texts.extra[off].
	off, n uint32
}

// extra marks an option kept in texts.extra.
const extra = math.MaxUint32

// texts are the files read, whose lines the options point into, and the
// options that are no line of a file.
type texts struct {
	files []string
	extra []keyValue
}

type keyValue struct{ key, value string }

// option returns o's key and its value, stripped, as assign read them.
func (t *texts) option(o option) (key, value string) {
	if o.n == extra {
		kv := t.extra[o.off]
		return kv.key, kv.value
	}
	key, value, _, _ = splitOption(t.files[o.file][o.off : o.off+o.n])
	return key, trimBlanks(value)
}

// newOption returns the option of the line ln of file, key = value.
func (t *texts) newOption(file int32, ln line, key, value string) option {
	o := option{file: file, line: int32(ln.num), off: uint32(ln.off), n: uint32(len(ln.text))}
	if ln.off < 0 || uint64(ln.off)+uint64(len(ln.text)) >= extra {
		t.extra = append(t.extra, keyValue{key, value})
		o.off, o.n = uint32(len(t.extra)-1), extra
	}
	return o
}

// section is one [name] of the merged configuration: its own options, then
// appended ones, with inherited ones copied in where the header named them.
type section struct {
	name     string
	file     string
	line     int32
	template bool
	// sourced marks a type=source section whose objects were imported
	// where it ended; its options are final.
	sourced bool
	opts    []option
	// next is the next section whose name folds to the same key, once
	// the parser indexes sections by name.
	next *section
}

// first returns the value of s's first option called name, as Asterisk's
// sorcery uses for type=.
func (t *texts) first(s *section, name string) (string, bool) {
	for _, o := range s.opts {
		if key, value := t.option(o); key == name {
			return value, true
		}
	}
	return "", false
}

// add appends o to the section's options, in the shared blocks of opts.
func (s *section) add(opts *optionBlocks, o option) error {
	if len(s.opts) >= maxVars {
		return causef(ErrSyntax, "more than %d options in one section", maxVars)
	}
	s.opts = opts.add(s.opts, o)
	return nil
}

// sectionBlocks holds the sections in file order, in blocks that never
// move, so that a *section stays valid and the builder can drop each
// block once it has read it.
type sectionBlocks struct {
	blocks [][]section
}

const sectionBlockSize = 1024

// add appends a copy of s and returns where it is kept.
func (b *sectionBlocks) add(s section) *section {
	n := len(b.blocks)
	if n == 0 || len(b.blocks[n-1]) == cap(b.blocks[n-1]) {
		b.blocks, n = append(b.blocks, make([]section, 0, sectionBlockSize)), n+1
	}
	blk := append(b.blocks[n-1], s)
	b.blocks[n-1] = blk
	return &blk[len(blk)-1]
}

// all yields every section in file order.
func (b *sectionBlocks) all(yield func(*section) bool) {
	for _, blk := range b.blocks {
		for i := range blk {
			if !yield(&blk[i]) {
				return
			}
		}
	}
}

// optionBlocks hands out the options of sections from shared blocks. A
// section's options are mostly written one after the other, so they take
// consecutive places in the current block and grow there; one that grows
// elsewhere (an append to an earlier section) is copied out by append.
// A million sections then cost a thousand allocations, not three million.
type optionBlocks struct {
	block []option
}

const optionBlockSize = 1024

func (b *optionBlocks) add(opts []option, o option) []option {
	n := len(b.block)
	last := len(opts) == 0 || n > 0 && &opts[len(opts)-1] == &b.block[n-1]
	if cap(opts) > len(opts) || !last || n == cap(b.block) && len(opts) > 0 {
		return append(opts, o)
	}
	if n == cap(b.block) {
		b.block, n = make([]option, 0, optionBlockSize), 0
	}
	b.block = append(b.block, o)
	return b.block[n-len(opts) : n+1 : n+1]
}

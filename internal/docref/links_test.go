package docref

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// link is a markdown link or image: [text](target) or ![alt](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// heading is a markdown heading line; punctuation is what an anchor drops.
var (
	heading     = regexp.MustCompile(`^#{1,6} (.*)$`)
	punctuation = regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
	inlineCode  = regexp.MustCompile("`[^`]*`")
)

// anchors returns the GitHub anchors of the headings of a markdown file:
// lower case, punctuation but "-" and "_" dropped, spaces as "-", a second
// heading of one anchor suffixed "-1".
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	for _, h := range headings(text) {
		a := strings.ToLower(h)
		a = punctuation.ReplaceAllString(a, "")
		a = strings.ReplaceAll(a, " ", "-")
		for n, b := 0, a; ; n++ {
			if !out[b] {
				out[b] = true
				break
			}
			b = a + "-" + string(rune('0'+n+1))
		}
	}
	return out
}

// headings returns the text of the file's headings, outside code blocks.
func headings(text string) []string {
	var out []string
	fence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil && !fence {
			out = append(out, m[1])
		}
	}
	return out
}

// prose is text without its code blocks and inline code, where links live.
func prose(text string) string {
	var b strings.Builder
	fence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if !fence {
			b.WriteString(inlineCode.ReplaceAllString(line, "") + "\n")
		}
	}
	return b.String()
}

// TestDocsLinks: every relative link of README.md and docs/*.md names a
// file that exists and, with #anchor, a heading of that file.
func TestDocsLinks(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) < 10 {
		t.Fatalf("docs/*.md: %v, %v", pages, err)
	}
	pages = append(pages, filepath.Join(root, "README.md"))
	links := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(prose(string(b)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			text, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%s: link %q: %v", page, target, err)
				continue
			}
			if anchor != "" && !anchors(string(text))[anchor] {
				t.Errorf("%s: link %q: %s has no heading #%s", page, target, file, anchor)
			}
		}
	}
	if links < 50 {
		t.Errorf("%d relative links found, far fewer than the pages have: is the link pattern broken?", links)
	}
	t.Logf("%d relative links checked in %d pages", links, len(pages))
}

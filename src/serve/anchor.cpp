// Anchor so this layer library always has a source file.
namespace frost::serve {
int serve_anchor() { return 0; }
}  // namespace frost::serve

// Anchor so this layer library always has a source file.
namespace frost::robot {
int robot_anchor() { return 0; }
}  // namespace frost::robot

// The image-text HDF5 schema, versions 1 and 2 (documented in docs/dataset-format.md).
// Names of every group, dataset and root attribute live here, once, with the limits
// the reader enforces before allocating anything from a size stored in a file.
// Versions: 2 adds the optional per-caption box and label (/captions/box, /captions/label);
// a writer stamps the lowest version that describes its file (1 without those fields),
// the reader reads kMinVersion..kVersion and refuses version-2 fields in a version-1 file.
#pragma once
#include <cstdint>

namespace vlm::schema {

inline constexpr const char* kFormat = "vlm-image-text";
inline constexpr int64_t kVersion = 2;     // the newest version, read and written
inline constexpr int64_t kMinVersion = 1;  // the oldest version read
inline constexpr int64_t kVersionBoxes = 2;  // the version that added /captions/box and /captions/label

// Root attributes.
inline constexpr const char* kAttrFormat = "format";
inline constexpr const char* kAttrVersion = "version";
inline constexpr const char* kAttrStorage = "image_storage";  // "encoded" | "raw"
inline constexpr const char* kAttrSource = "source";          // free text: where it came from
inline constexpr const char* kStorageEncoded = "encoded";
inline constexpr const char* kStorageRaw = "raw";

// Images (N of them).
inline constexpr const char* kImEncoded = "/images/encoded";   // u8 [total_bytes]
inline constexpr const char* kImOffsets = "/images/offsets";   // i64 [N+1]
inline constexpr const char* kImRaw = "/images/raw";           // u8 [N,H,W,C]
inline constexpr const char* kImHeight = "/images/height";     // i32 [N]
inline constexpr const char* kImWidth = "/images/width";       // i32 [N]
inline constexpr const char* kImChannels = "/images/channels"; // i32 [N]
inline constexpr const char* kImLabel = "/images/label";       // i32 [N], optional
inline constexpr const char* kAttrClassNames = "class_names";  // on /images (and /captions), '\n'-joined

// Captions (M of them, any number per image).
inline constexpr const char* kCapText = "/captions/text";              // u8 [bytes] UTF-8
inline constexpr const char* kCapTextOffsets = "/captions/text_offsets";  // i64 [M+1]
inline constexpr const char* kCapImage = "/captions/image";            // i64 [M]
inline constexpr const char* kCapPrompt = "/captions/prompt";          // u8, optional
inline constexpr const char* kCapPromptOffsets = "/captions/prompt_offsets";  // i64 [M+1]
inline constexpr const char* kCapTokens = "/captions/tokens";          // i32, optional
inline constexpr const char* kCapTokenOffsets = "/captions/token_offsets";  // i64 [M+1]
inline constexpr const char* kAttrTokenizer = "tokenizer";  // on /captions: tokenizer name
// Version 2, optional: the box of what caption j is about, x0 y0 x1 y1 in pixels of its
// image, half-open (0 <= x0 < x1 <= width, 0 <= y0 < y1 <= height); and its class id,
// with the class names in the attribute /captions@class_names ('\n'-joined).
inline constexpr const char* kCapBox = "/captions/box";      // i32 [M,4]
inline constexpr const char* kCapLabel = "/captions/label";  // i32 [M], 0 <= label (< #class_names)

// Splits: image indices, sorted ascending, disjoint.
inline constexpr const char* kSplitTrain = "/splits/train";
inline constexpr const char* kSplitVal = "/splits/val";
inline constexpr const char* kSplitTest = "/splits/test";

// Limits checked by the reader before any allocation.
inline constexpr int64_t kMaxImages = int64_t(1) << 31;
inline constexpr int64_t kMaxCaptions = int64_t(1) << 31;
inline constexpr int64_t kMaxImageBytes = int64_t(256) << 20;  // one encoded image
inline constexpr int64_t kMaxSide = 32768;                      // height or width
inline constexpr int64_t kMaxCaptionBytes = int64_t(1) << 20;   // one caption or prompt
inline constexpr int64_t kMaxCaptionTokens = int64_t(1) << 18;  // one caption's tokens

}  // namespace vlm::schema

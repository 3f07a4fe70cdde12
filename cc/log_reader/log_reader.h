// Native reader of LLVM's training-log stream (TrainingLogger's format, also what
// the interactive channel sends). Format and rules: python/mlgo/log/spec.py; the
// pure-Python reference reader (mlgo.log.pyreader) accepts and rejects exactly the
// same inputs.
//
// The reader pulls bytes from a Source only when the current record needs more,
// and a Source returns whatever is available (one read(2)), so it never waits for
// bytes beyond the record being decoded: safe on the interactive channel's FIFO.
#ifndef MLGO_CC_LOG_READER_LOG_READER_H_
#define MLGO_CC_LOG_READER_LOG_READER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mlgo::logreader {

// Limits, identical to python/mlgo/log/spec.py.
inline constexpr size_t kMaxHeaderLine = size_t{16} << 20;
inline constexpr size_t kMaxEventLine = size_t{1} << 20;
inline constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;
inline constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 30;
inline constexpr uint64_t kMaxRecordBytes = uint64_t{1} << 30;

enum class DType { kFloat, kDouble, kInt8, kUInt8, kInt16, kUInt16, kInt32, kUInt32,
                   kInt64, kUInt64 };

// LLVM's name of the type ("float", "int64_t", ...), its size in bytes.
const char* DTypeName(DType t);
size_t DTypeSize(DType t);
std::optional<DType> DTypeFromName(const std::string& name);

struct TensorSpec {
  std::string name;
  DType dtype = DType::kFloat;
  std::vector<int64_t> shape;
  int64_t port = 0;
  uint64_t elements = 1;
  uint64_t nbytes = 0;
};

struct Header {
  std::vector<TensorSpec> features;
  std::optional<TensorSpec> score;
  std::optional<TensorSpec> advice;
  uint64_t observation_bytes = 0;  // all features of one observation
};

// Malformed stream: `offset` is where the offending record (line) starts.
class FormatError : public std::runtime_error {
 public:
  FormatError(uint64_t offset, std::string problem);
  uint64_t offset() const { return offset_; }
  const std::string& problem() const { return problem_; }

 private:
  uint64_t offset_;
  std::string problem_;
};

// Where bytes come from. Read returns 1..max bytes, or 0 at end of stream; it
// returns as soon as some bytes are available. I/O errors throw.
class Source {
 public:
  virtual ~Source() = default;
  virtual size_t Read(char* buf, size_t max) = 0;
};

// read(2) on a file descriptor (retrying EINTR); closes it if `owned`.
class FdSource : public Source {
 public:
  FdSource(int fd, bool owned) : fd_(fd), owned_(owned) {}
  ~FdSource() override;
  size_t Read(char* buf, size_t max) override;

 private:
  int fd_;
  bool owned_;
};

// Opens `path` read-only. Throws std::system_error when it cannot.
std::unique_ptr<Source> OpenFile(const std::string& path);

// A memory buffer the caller keeps alive.
class MemorySource : public Source {
 public:
  MemorySource(const char* data, size_t size) : data_(data), size_(size) {}
  size_t Read(char* buf, size_t max) override;

 private:
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Parses and validates a header line (without its newline); errors name `offset`.
Header ParseHeader(const char* line, size_t size, uint64_t offset = 0);

struct Event {
  enum class Kind { kEnd, kContext, kObservation, kOutcome };
  Kind kind = Kind::kEnd;
  std::string context;     // kContext
  int64_t index = 0;       // kObservation, kOutcome
  const char* data = nullptr;  // tensor bytes, valid until the next call
  size_t size = 0;
  uint64_t offset = 0;     // where the record starts
};

class Reader {
 public:
  explicit Reader(std::unique_ptr<Source> source);

  // Reads the header on first call. Throws FormatError.
  const Header& header();
  // Next event; kind kEnd at a clean end of stream. After a FormatError every
  // further call throws the same error.
  const Event& Next();
  uint64_t offset() const { return base_ + pos_; }

 private:
  // Makes at least `n` unread bytes available; false if the stream ended first.
  bool Need(size_t n);
  // One more read from the source into the buffer; false at end of stream.
  bool Fill(size_t want);
  // The next line (without newline) as [*line, *line + *len); false at a clean
  // end of stream when eof_ok.
  bool Line(size_t limit, const char* what, bool eof_ok, const char** line, size_t* len);
  void ReadHeader();
  void ReadEvent();
  void Tensors(size_t n, uint64_t start, const std::string& what);
  [[noreturn]] void Fail(uint64_t offset, std::string problem);

  std::unique_ptr<Source> source_;
  std::unique_ptr<char[]> buf_;
  size_t cap_ = 0;
  size_t chunk_ = size_t{1} << 14;  // free space wanted before a read
  size_t pos_ = 0;     // next unread byte in buf_
  size_t end_ = 0;     // end of valid bytes in buf_
  uint64_t base_ = 0;  // stream offset of buf_[0]
  bool eof_ = false;
  bool have_header_ = false;
  Header header_;
  Event event_;
  std::optional<FormatError> error_;
};

// A whole stream grouped per context, features stacked (observations first).
struct ContextData {
  std::string name;
  std::vector<std::vector<char>> features;  // per header feature, bytes of all obs
  std::vector<char> outcomes;
  size_t num_outcomes = 0;
  std::vector<int64_t> indices;
};

struct LogData {
  Header header;
  std::vector<ContextData> contexts;  // in order of first appearance
};

LogData ReadAll(Reader& reader);

}  // namespace mlgo::logreader

#endif  // MLGO_CC_LOG_READER_LOG_READER_H_

// Python binding of the native training-log reader: mlgo_log_reader_native.
// Used through mlgo.log.native (same API as mlgo.log.pyreader). Blocking reads on
// a file descriptor happen with the GIL released.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "cc/log_reader/log_reader.h"

namespace py = pybind11;

namespace mlgo::logreader {
namespace {

py::dtype ToDtype(DType t) {
  switch (t) {
    case DType::kFloat: return py::dtype::of<float>();
    case DType::kDouble: return py::dtype::of<double>();
    case DType::kInt8: return py::dtype::of<int8_t>();
    case DType::kUInt8: return py::dtype::of<uint8_t>();
    case DType::kInt16: return py::dtype::of<int16_t>();
    case DType::kUInt16: return py::dtype::of<uint16_t>();
    case DType::kInt32: return py::dtype::of<int32_t>();
    case DType::kUInt32: return py::dtype::of<uint32_t>();
    case DType::kInt64: return py::dtype::of<int64_t>();
    case DType::kUInt64: return py::dtype::of<uint64_t>();
  }
  throw std::logic_error("bad dtype");
}

py::str Utf8(const std::string& s) {
  // Messages may quote bytes cut mid-character: never fail on them.
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

// Classes of mlgo.log.spec, looked up once (kept alive until exit on purpose).
struct SpecClasses {
  py::handle feature_spec, context, observation, outcome, context_log, error;
};

const SpecClasses& Classes() {
  static SpecClasses* c = [] {
    py::module_ spec = py::module_::import("mlgo.log.spec");
    auto* k = new SpecClasses;
    k->feature_spec = py::object(spec.attr("FeatureSpec")).release();
    k->context = py::object(spec.attr("Context")).release();
    k->observation = py::object(spec.attr("Observation")).release();
    k->outcome = py::object(spec.attr("Outcome")).release();
    k->context_log = py::object(spec.attr("ContextLog")).release();
    k->error = py::object(spec.attr("LogFormatError")).release();
    return k;
  }();
  return *c;
}

// A Python file object; read1() (or a raw read()) is called with the GIL held.
class PyFileSource : public Source {
 public:
  explicit PyFileSource(py::object read) : read_(std::move(read)) {}
  ~PyFileSource() override {
    py::gil_scoped_acquire gil;
    read_ = py::object();
  }
  size_t Read(char* buf, size_t max) override {
    py::gil_scoped_acquire gil;
    py::object r = read_(max);
    if (r.is_none()) throw std::runtime_error("source returned None (non-blocking file?)");
    py::buffer_info info = py::buffer(r).request();
    size_t n = static_cast<size_t>(info.size * info.itemsize);
    if (n > max) throw std::runtime_error("source returned more bytes than asked for");
    std::memcpy(buf, info.ptr, n);
    return n;
  }

 private:
  py::object read_;
};

// bytes (immutable: read without copying) or a private copy of another buffer.
class BufferSource : public Source {
 public:
  explicit BufferSource(py::bytes b) : bytes_(std::move(b)) {
    char* data;
    Py_ssize_t size;
    PyBytes_AsStringAndSize(bytes_.ptr(), &data, &size);
    mem_ = std::make_unique<MemorySource>(data, static_cast<size_t>(size));
  }
  explicit BufferSource(std::string copy) : copy_(std::move(copy)) {
    mem_ = std::make_unique<MemorySource>(copy_.data(), copy_.size());
  }
  ~BufferSource() override {
    if (bytes_) {
      py::gil_scoped_acquire gil;
      bytes_ = py::bytes();
    }
  }
  size_t Read(char* buf, size_t max) override { return mem_->Read(buf, max); }

 private:
  py::bytes bytes_{py::reinterpret_steal<py::bytes>(py::handle())};
  std::string copy_;
  std::unique_ptr<MemorySource> mem_;
};

std::unique_ptr<Source> MakeSource(const py::object& src, bool allow_path) {
  if (py::isinstance<py::bool_>(src)) throw py::type_error("cannot read a training log from bool");
  if (py::isinstance<py::int_>(src)) return std::make_unique<FdSource>(src.cast<int>(), false);
  if (py::isinstance<py::bytes>(src)) return std::make_unique<BufferSource>(src.cast<py::bytes>());
  if (allow_path && py::isinstance<py::str>(src)) return OpenFile(src.cast<std::string>());
  if (PyObject_CheckBuffer(src.ptr())) {
    py::buffer_info info = py::buffer(src).request();
    return std::make_unique<BufferSource>(
        std::string(static_cast<const char*>(info.ptr), info.size * info.itemsize));
  }
  if (py::hasattr(src, "read1")) return std::make_unique<PyFileSource>(src.attr("read1"));
  if (py::hasattr(src, "read")) return std::make_unique<PyFileSource>(src.attr("read"));
  throw py::type_error("cannot read a training log from " +
                       std::string(py::str(py::type::of(src).attr("__name__"))));
}

py::object SpecObject(const TensorSpec& s) {
  py::tuple shape(s.shape.size());
  for (size_t i = 0; i < s.shape.size(); ++i) shape[i] = py::int_(s.shape[i]);
  return Classes().feature_spec(Utf8(s.name), ToDtype(s.dtype), shape, py::int_(s.port));
}

std::vector<py::ssize_t> Dims(const TensorSpec& s, std::optional<size_t> rows) {
  std::vector<py::ssize_t> d;
  if (rows) d.push_back(static_cast<py::ssize_t>(*rows));
  for (int64_t x : s.shape) d.push_back(static_cast<py::ssize_t>(x));
  return d;
}

py::array Tensor(const TensorSpec& s, const char* data) {
  return py::array(ToDtype(s.dtype), Dims(s, std::nullopt), data);  // copies
}

// Moves `bytes` into a numpy array without copying.
py::array Stacked(const TensorSpec& s, size_t rows, std::vector<char>&& bytes) {
  auto* owner = new std::vector<char>(std::move(bytes));
  py::capsule free(owner, [](void* p) { delete static_cast<std::vector<char>*>(p); });
  return py::array(ToDtype(s.dtype), Dims(s, rows), owner->data(), free);
}

class PyReader {
 public:
  explicit PyReader(const py::object& src) : reader_(MakeSource(src, false)) {}

  py::tuple Header() {
    if (!header_) {
      const logreader::Header* h;
      std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
      {
        py::gil_scoped_release nogil;  // lock only without the GIL: no deadlock
        lock.lock();
        h = &reader_.header();
      }
      py::list feats;
      for (const TensorSpec& s : h->features) feats.append(SpecObject(s));
      header_ = py::make_tuple(feats, h->score ? SpecObject(*h->score) : py::none(),
                               h->advice ? SpecObject(*h->advice) : py::none());
    }
    return header_;
  }

  py::object NextEvent() {
    Header();
    const Event* ev;
    // Held until the event is converted: a reader shared by threads stays consistent.
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    {
      py::gil_scoped_release nogil;
      lock.lock();
      ev = &reader_.Next();
    }
    const SpecClasses& c = Classes();
    const logreader::Header& h = reader_.header();
    switch (ev->kind) {
      case Event::Kind::kEnd:
        return py::none();
      case Event::Kind::kContext:
        return c.context(Utf8(ev->context));
      case Event::Kind::kObservation: {
        if (dtypes_.size() != h.features.size()) {  // cached: saves most of the per-call cost
          for (const TensorSpec& s : h.features) {
            dtypes_.push_back(ToDtype(s.dtype));
            dims_.push_back(Dims(s, std::nullopt));
          }
        }
        // One copy of the record; the features are views into it (like the
        // Python reader's frombuffer views), which halves the array creations.
        py::array_t<uint8_t> record(static_cast<py::ssize_t>(ev->size));
        if (ev->size) std::memcpy(record.mutable_data(), ev->data, ev->size);
        const char* base = reinterpret_cast<const char*>(record.data());
        py::list feats(h.features.size());
        size_t off = 0;
        for (size_t i = 0; i < h.features.size(); ++i) {
          feats[i] = py::array(dtypes_[i], dims_[i], base + off, record);
          off += h.features[i].nbytes;
        }
        return c.observation(py::int_(ev->index), feats);
      }
      case Event::Kind::kOutcome:
        return c.outcome(py::int_(ev->index), Tensor(*h.score, ev->data));
    }
    return py::none();
  }

 private:
  std::mutex mu_;
  Reader reader_;
  std::vector<py::dtype> dtypes_;
  std::vector<std::vector<py::ssize_t>> dims_;
  py::tuple header_{py::reinterpret_steal<py::tuple>(py::handle())};
};

py::list ReadLog(const py::object& src) {
  Reader reader(MakeSource(src, true));
  LogData data;
  {
    py::gil_scoped_release nogil;
    data = ReadAll(reader);
  }
  const SpecClasses& c = Classes();
  py::list out;
  for (ContextData& ctx : data.contexts) {
    size_t rows = ctx.indices.size();
    py::dict feats;
    for (size_t i = 0; i < data.header.features.size(); ++i) {
      const TensorSpec& s = data.header.features[i];
      feats[Utf8(s.name)] = Stacked(s, rows, std::move(ctx.features[i]));
    }
    py::object outcomes = py::none();
    if (ctx.num_outcomes)
      outcomes = Stacked(*data.header.score, ctx.num_outcomes, std::move(ctx.outcomes));
    std::vector<char> idx(ctx.indices.size() * sizeof(int64_t));
    if (!idx.empty()) std::memcpy(idx.data(), ctx.indices.data(), idx.size());
    TensorSpec index_spec;
    index_spec.dtype = DType::kInt64;
    out.append(c.context_log(Utf8(ctx.name), feats, outcomes,
                             Stacked(index_spec, rows, std::move(idx))));
  }
  return out;
}

}  // namespace
}  // namespace mlgo::logreader

PYBIND11_MODULE(mlgo_log_reader_native, m) {
  using namespace mlgo::logreader;
  m.doc() = "Native reader of LLVM's training-log stream (see mlgo.log).";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const FormatError& e) {
      py::handle cls = Classes().error;
      py::object inst = cls(py::int_(e.offset()), Utf8(e.problem()));
      PyErr_SetObject(cls.ptr(), inst.ptr());
    } catch (const std::system_error& e) {
      py::object err = py::reinterpret_borrow<py::object>(PyExc_OSError)(
          e.code().value(), Utf8(e.what()));
      PyErr_SetObject(PyExc_OSError, err.ptr());
    }
  });
  py::class_<PyReader>(m, "Reader")
      .def(py::init<const py::object&>(), py::arg("source"))
      .def("header", &PyReader::Header, "(features, score, advice); reads it on first call")
      .def("next_event", &PyReader::NextEvent);
  m.def("read_log", &ReadLog, py::arg("source"),
        "Whole stream (path, fd, bytes or file object) -> list of ContextLog.");
}

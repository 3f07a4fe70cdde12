// mlgo runtime_check driver for TinyXML (2.6, STL build as in Debian). A product catalog
// goes through ROUNDS rounds: it is parsed (from the file, then from the previous round's
// text), walked by a visitor and by hand, queried (stock, prices, tags, handles), edited
// (attributes set and removed, items removed, cloned and moved, children added, replaced
// and dropped, text rewritten), printed with TiXmlPrinter (indented, or as a stream),
// parsed again and compared node by node with the edited tree; some single items also go
// through operator<< and operator>> (the stream parser). A few broken snippets exercise
// the error reporting. Counts and FNV-1a checksums of the printed texts are written; no
// addresses. Usage: tinyxml_run FILE.xml ROUNDS
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "tinyxml.h"

namespace {

struct Fnv {
  uint64_t h = 1469598103934665603ULL;
  void Bytes(const char* s, size_t n) {
    for (size_t i = 0; i < n; i++) {
      h ^= static_cast<unsigned char>(s[i]);
      h *= 1099511628211ULL;
    }
  }
  void Str(const char* s) {
    Bytes(s, std::strlen(s));
    h ^= 0xff;
    h *= 1099511628211ULL;
  }
  void Str(const std::string& s) {
    Bytes(s.data(), s.size());
    h ^= 0xff;
    h *= 1099511628211ULL;
  }
  void Num(long long v) {
    char buf[32];
    int n = std::snprintf(buf, sizeof buf, "%lld", v);
    Bytes(buf, static_cast<size_t>(n));
    h ^= 0xfe;
    h *= 1099511628211ULL;
  }
};

// Counts every kind of node, hashes names, attribute pairs and texts in document order.
class Census : public TiXmlVisitor {
 public:
  long elements = 0, attributes = 0, texts = 0, cdata = 0, comments = 0, unknowns = 0,
       decls = 0, text_bytes = 0;
  int depth = 0, max_depth = 0;
  Fnv fnv;

  bool VisitEnter(const TiXmlDocument&) override { return true; }
  bool VisitEnter(const TiXmlElement& e, const TiXmlAttribute* a) override {
    elements++;
    if (++depth > max_depth) max_depth = depth;
    fnv.Str(e.ValueStr());
    for (; a; a = a->Next()) {
      attributes++;
      fnv.Str(a->Name());
      fnv.Str(a->ValueStr());
    }
    return true;
  }
  bool VisitExit(const TiXmlElement&) override {
    depth--;
    fnv.Num(-1);
    return true;
  }
  bool Visit(const TiXmlDeclaration& d) override {
    decls++;
    fnv.Str(d.Version());
    fnv.Str(d.Encoding());
    return true;
  }
  bool Visit(const TiXmlText& t) override {
    if (t.CDATA()) cdata++; else texts++;
    text_bytes += static_cast<long>(t.ValueStr().size());
    fnv.Str(t.ValueStr());
    return true;
  }
  bool Visit(const TiXmlComment& c) override {
    comments++;
    fnv.Str(c.ValueStr());
    return true;
  }
  bool Visit(const TiXmlUnknown& u) override {
    unknowns++;
    fnv.Str(u.ValueStr());
    return true;
  }
  void Print(const char* what) const {
    std::printf("  %s: elements %ld attributes %ld texts %ld cdata %ld comments %ld "
                "unknowns %ld decls %ld text-bytes %ld depth %d hash %016llx\n",
                what, elements, attributes, texts, cdata, comments, unknowns, decls,
                text_bytes, max_depth, static_cast<unsigned long long>(fnv.h));
  }
};

// The same figures gathered without the visitor, by following child and sibling links.
void Walk(const TiXmlNode* n, long* nodes, long* attrs, long* chars) {
  for (const TiXmlNode* c = n->FirstChild(); c; c = c->NextSibling()) {
    (*nodes)++;
    *chars += static_cast<long>(c->ValueStr().size());
    if (const TiXmlElement* e = c->ToElement()) {
      for (const TiXmlAttribute* a = e->FirstAttribute(); a; a = a->Next()) (*attrs)++;
      Walk(c, nodes, attrs, chars);
    }
  }
}

// Node-by-node comparison; counts the nodes visited and the first few differences.
long Compare(const TiXmlNode* a, const TiXmlNode* b, long* visited) {
  (*visited)++;
  if (a->Type() != b->Type()) return 1;
  // A document's value is the name of the file it came from; not part of the content.
  if (!a->ToDocument() && a->ValueStr() != b->ValueStr()) return 1;
  if (a->ToText() && a->ToText()->CDATA() != b->ToText()->CDATA()) return 1;
  if (const TiXmlElement* ea = a->ToElement()) {
    const TiXmlAttribute* x = ea->FirstAttribute();
    const TiXmlAttribute* y = b->ToElement()->FirstAttribute();
    for (; x && y; x = x->Next(), y = y->Next())
      if (std::strcmp(x->Name(), y->Name()) != 0 || x->ValueStr() != y->ValueStr()) return 1;
    if (x || y) return 1;
  }
  long diffs = 0;
  const TiXmlNode* ca = a->FirstChild();
  const TiXmlNode* cb = b->FirstChild();
  for (; ca && cb; ca = ca->NextSibling(), cb = cb->NextSibling()) {
    diffs += Compare(ca, cb, visited);
    if (diffs > 3) return diffs;
  }
  if (ca || cb) diffs++;
  return diffs;
}

int IdNumber(const TiXmlElement* item) {
  const char* id = item->Attribute("id");
  return id && id[0] ? std::atoi(id + 1) : -1;
}

long long Cents(const TiXmlElement* price) {
  const char* t = price ? price->GetText() : nullptr;
  return t ? std::llround(std::atof(t) * 100.0) : 0;
}

// Appends the text of every text node under n (mixed content flattened).
void InnerText(const TiXmlNode* n, std::string* out) {
  for (const TiXmlNode* c = n->FirstChild(); c; c = c->NextSibling()) {
    if (const TiXmlText* t = c->ToText()) {
      if (!out->empty()) out->push_back(' ');
      out->append(t->ValueStr());
    } else if (c->ToElement()) {
      InnerText(c, out);
    }
  }
}

struct Query {
  long categories = 0, items = 0, stock = 0, tags = 0, blue = 0, bold = 0, featured = 0,
       notes = 0, words = 0;
  long long value_cents = 0, price_cents = 0;
  Fnv names;
};

Query Survey(TiXmlDocument& doc) {
  Query q;
  TiXmlElement* root = doc.RootElement();
  for (TiXmlElement* cat = root->FirstChildElement("category"); cat;
       cat = cat->NextSiblingElement("category")) {
    q.categories++;
    for (TiXmlElement* item = cat->FirstChildElement("item"); item;
         item = item->NextSiblingElement("item")) {
      q.items++;
      int stock = 0;
      if (item->QueryIntAttribute("stock", &stock) == TIXML_SUCCESS) q.stock += stock;
      long long cents = Cents(item->FirstChildElement("price"));
      q.price_cents += cents;
      q.value_cents += cents * stock;
      std::string featured;
      if (item->QueryValueAttribute(std::string("x:featured"), &featured) == TIXML_SUCCESS &&
          featured == "yes")
        q.featured++;
      if (const TiXmlElement* name = item->FirstChildElement("name"))
        if (name->GetText()) q.names.Str(name->GetText());
      if (TiXmlElement* tags = item->FirstChildElement("tags"))
        for (TiXmlElement* t = tags->FirstChildElement(); t; t = t->NextSiblingElement()) {
          q.tags++;
          if (t->GetText() && std::strcmp(t->GetText(), "blue") == 0) q.blue++;
        }
      if (const TiXmlElement* d = item->FirstChildElement("description")) {
        for (const TiXmlElement* b = d->FirstChildElement("b"); b;
             b = b->NextSiblingElement("b"))
          q.bold++;
        std::string text;
        InnerText(d, &text);
        bool in_word = false;
        for (char ch : text) {
          bool w = ch != ' ';
          if (w && !in_word) q.words++;
          in_word = w;
        }
      }
      if (item->FirstChild("notes")) q.notes++;
    }
  }
  return q;
}

void PrintQuery(const Query& q) {
  std::printf("  query: categories %ld items %ld stock %ld price %lld.%02lld value %lld.%02lld "
              "tags %ld blue %ld bold %ld featured %ld notes %ld words %ld names %016llx\n",
              q.categories, q.items, q.stock, q.price_cents / 100, q.price_cents % 100,
              q.value_cents / 100, q.value_cents % 100, q.tags, q.blue, q.bold, q.featured,
              q.notes, q.words, static_cast<unsigned long long>(q.names.h));
}

// Handle chains into the tree at a spread of positions.
void Probe(TiXmlDocument& doc, Fnv* fnv) {
  TiXmlHandle h(&doc);
  TiXmlHandle catalog = h.FirstChildElement("catalog");
  long found = 0, missing = 0;
  for (int c = 0; c < 140; c += 2) {
    for (int i = 0; i < 24; i += 3) {
      TiXmlElement* price =
          catalog.ChildElement("category", c).ChildElement("item", i).FirstChild("price")
              .ToElement();
      if (!price) {
        missing++;
        continue;
      }
      found++;
      fnv->Num(Cents(price));
      const char* cur = price->Attribute("currency");
      fnv->Str(cur ? cur : "-");
    }
  }
  std::printf("  handles: found %ld missing %ld hash %016llx\n", found, missing,
              static_cast<unsigned long long>(fnv->h));
}

struct Edits {
  long removed = 0, cloned = 0, attrs_set = 0, attrs_removed = 0, added = 0, dropped = 0,
       replaced = 0, renamed = 0, moved = 0;
};

// One round of edits; what changes depends on the round number.
Edits Edit(TiXmlDocument& doc, int round) {
  Edits e;
  TiXmlElement* root = doc.RootElement();
  root->SetAttribute("round", round);
  char buf[64];
  std::snprintf(buf, sizeof buf, "r%d", round);
  TiXmlElement fresh("category");
  fresh.SetAttribute("id", buf);
  fresh.SetAttribute(std::string("name"), std::string("copies of round ") + buf);
  TiXmlElement* extra = root->InsertEndChild(fresh)->ToElement();
  int ordinal = 0;
  for (TiXmlElement* cat = root->FirstChildElement("category"); cat;) {
    TiXmlElement* next_cat = cat->NextSiblingElement("category");
    if (cat == extra) break;
    if (round == 0) {
      TiXmlComment note;
      std::snprintf(buf, sizeof buf, " category %d ", ordinal);
      note.SetValue(buf);
      root->InsertBeforeChild(cat, note);
      e.added++;
    }
    for (TiXmlElement* item = cat->FirstChildElement("item"); item;) {
      TiXmlElement* next = item->NextSiblingElement("item");
      int id = IdNumber(item);
      int stock = 0;
      item->QueryIntAttribute("stock", &stock);
      long long cents = Cents(item->FirstChildElement("price"));
      if ((round == 0 && stock == 0) || (round > 0 && (id * 7 + round) % 31 == 0)) {
        cat->RemoveChild(item);
        e.removed++;
        item = next;
        continue;
      }
      if ((id + round) % 17 == 0) {
        // A copy goes to this round's category under a new id; the original moves to
        // the front of its own category.
        TiXmlNode* copy = item->Clone();
        std::snprintf(buf, sizeof buf, "i%d", id + 100000 * (round + 1));
        copy->ToElement()->SetAttribute("id", buf);
        extra->LinkEndChild(copy);
        e.cloned++;
        if (cat->FirstChild() != item) {
          TiXmlNode* moved = cat->InsertBeforeChild(cat->FirstChild(), *item);
          cat->RemoveChild(item);
          item = moved->ToElement();
          e.moved++;
        }
      }
      stock = (stock * 5 + round + 1) % 100;
      item->SetAttribute("stock", stock);
      item->SetAttribute("value", static_cast<int>((cents * stock) / 100));
      if (id % 3 == round % 3) {
        item->SetDoubleAttribute("ratio", cents ? stock * 100.0 / cents : 0.0);
        e.attrs_set++;
      } else if (item->Attribute("ratio")) {
        item->RemoveAttribute("ratio");
        e.attrs_removed++;
      }
      e.attrs_set += 2;
      if ((id + round) % 4 == 0 && item->Attribute("sku")) {
        item->RemoveAttribute("sku");
        e.attrs_removed++;
      }
      if (round == 1 && item->Attribute("x:featured")) {
        item->RemoveAttribute(std::string("x:featured"));
        e.attrs_removed++;
      }
      // A history entry per round; the entries of earlier rounds are dropped.
      TiXmlElement* hist = new TiXmlElement("history");
      hist->SetAttribute("round", round);
      hist->SetAttribute("stock", stock);
      std::snprintf(buf, sizeof buf, "round %d stock %d & value < %lld", round, stock,
                    (cents * stock) / 100);
      hist->LinkEndChild(new TiXmlText(buf));
      item->LinkEndChild(hist);
      e.added++;
      for (TiXmlElement* old = item->FirstChildElement("history"); old;) {
        TiXmlElement* nh = old->NextSiblingElement("history");
        int r = -1;
        old->QueryIntAttribute("round", &r);
        if (r >= 0 && r < round) {
          item->RemoveChild(old);
          e.dropped++;
        }
        old = nh;
      }
      // Tag texts: one colour renamed per round; CDATA notes become plain text in
      // round 1 (escaped on output from then on).
      if (TiXmlElement* tags = item->FirstChildElement("tags")) {
        static const char* kFrom[] = {"blue", "navy", "red", "crimson"};
        static const char* kTo[] = {"navy", "blue", "crimson", "red"};
        for (TiXmlElement* t = tags->FirstChildElement("tag"); t;
             t = t->NextSiblingElement("tag")) {
          TiXmlText* txt = t->FirstChild() ? t->FirstChild()->ToText() : nullptr;
          if (txt && txt->ValueStr() == kFrom[round % 4]) {
            txt->SetValue(kTo[round % 4]);
            e.renamed++;
          }
        }
        if ((id + round) % 11 == 0) {
          TiXmlElement tag("tag");
          tag.LinkEndChild(new TiXmlText(round % 2 ? "sale" : "new"));
          tags->InsertAfterChild(tags->FirstChild(), tag);
          e.added++;
        }
      }
      if (round == 1)
        if (TiXmlElement* notes = item->FirstChildElement("notes"))
          if (TiXmlNode* c = notes->FirstChild())
            if (c->ToText() && c->ToText()->CDATA()) {
              TiXmlText plain(c->ValueStr());
              notes->ReplaceChild(c, plain);
              e.replaced++;
            }
      // Comments and processing instructions inside items go in round 1.
      if (round == 1)
        for (TiXmlNode* c = item->FirstChild(); c;) {
          TiXmlNode* nc = c->NextSibling();
          if (c->ToComment() || c->ToUnknown()) {
            item->RemoveChild(c);
            e.dropped++;
          }
          c = nc;
        }
      if (round == 1 && id % 2 == 0)
        if (TiXmlElement* name = item->FirstChildElement("name")) {
          name->SetValue("title");
          e.renamed++;
        }
      item = next;
    }
    ordinal++;
    cat = next_cat;
  }
  std::printf("  edits: removed %ld cloned %ld moved %ld attrs set %ld removed %ld added %ld "
              "dropped %ld replaced %ld renamed %ld\n",
              e.removed, e.cloned, e.moved, e.attrs_set, e.attrs_removed, e.added, e.dropped,
              e.replaced, e.renamed);
  return e;
}

// Every 16th item printed on its own and read back through operator>> (the stream
// parser), then compared with the original.
long StreamItems(const TiXmlDocument& doc, int round) {
  long items = 0, bytes = 0, visited = 0, diffs = 0;
  int k = round;
  for (const TiXmlElement* cat = doc.RootElement()->FirstChildElement("category"); cat;
       cat = cat->NextSiblingElement("category"))
    for (const TiXmlElement* item = cat->FirstChildElement("item"); item;
         item = item->NextSiblingElement("item")) {
      if (k++ % 16 != 0) continue;
      std::string text;
      text << *item;
      std::istringstream in(text);
      TiXmlElement back("");
      in >> back;
      items++;
      bytes += static_cast<long>(text.size());
      diffs += Compare(item, &back, &visited);
    }
  std::printf("  streamed: items %ld bytes %ld visited %ld diffs %ld\n", items, bytes, visited,
              diffs);
  return diffs;
}

std::string Print(const TiXmlDocument& doc, int round) {
  if (round % 2 == 1) {
    std::string out;
    out << doc;  // stream printing: no indentation, no line breaks
    return out;
  }
  TiXmlPrinter printer;
  printer.SetIndent(round % 4 == 0 ? "  " : "\t");
  printer.SetLineBreak(round % 4 == 0 ? "\n" : "\r\n");
  doc.Accept(&printer);
  return std::string(printer.CStr(), printer.Size());
}

bool Check(const TiXmlDocument& doc, const char* what) {
  if (!doc.Error()) return true;
  std::printf("%s: error %d (%s) at %d:%d\n", what, doc.ErrorId(), doc.ErrorDesc(),
              doc.ErrorRow(), doc.ErrorCol());
  return false;
}

void Errors() {
  static const char* kBroken[] = {
      "<a><b></a>", "<a x='1' x='2'/>", "<a>text", "<!-- open", "<a x=1/>",
      "", "<a><![CDATA[never closed</a>", "<?xml version='1.0'?><a>&bogus;</a>",
      "<a>\n<b>\n</c></a>", "<a b='&#x;'/>", "<root><x y=\"1\"></x><x y=\"2\"/></root>"};
  Fnv fnv;
  int ok = 0;
  for (const char* s : kBroken) {
    TiXmlDocument d;
    d.Parse(s);
    if (!d.Error()) {
      ok++;
      std::string out;
      out << d;
      fnv.Str(out);
      continue;
    }
    fnv.Num(d.ErrorId());
    fnv.Str(d.ErrorDesc());
    fnv.Num(d.ErrorRow());
    fnv.Num(d.ErrorCol());
  }
  std::printf("broken snippets: %zu parsed %d hash %016llx\n",
              sizeof kBroken / sizeof kBroken[0], ok, static_cast<unsigned long long>(fnv.h));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s FILE.xml ROUNDS\n", argv[0]);
    return 2;
  }
  int rounds = std::atoi(argv[2]);
  TiXmlDocument doc;
  if (!doc.LoadFile(argv[1], TIXML_ENCODING_UTF8) || !Check(doc, "load")) return 1;
  Fnv all;
  long total_diffs = 0;
  for (int round = 0; round < rounds; round++) {
    std::printf("round %d\n", round);
    Census before;
    doc.Accept(&before);
    before.Print("parsed");
    long nodes = 0, attrs = 0, chars = 0;
    Walk(&doc, &nodes, &attrs, &chars);
    std::printf("  walk: nodes %ld attributes %ld value-bytes %ld\n", nodes, attrs, chars);
    PrintQuery(Survey(doc));
    Fnv probe;
    Probe(doc, &probe);
    Edit(doc, round);
    total_diffs += StreamItems(doc, round);
    Census after;
    doc.Accept(&after);
    after.Print("edited");
    // A copy of the whole document must match it node for node.
    TiXmlDocument copy(doc);
    long visited = 0;
    long diffs = Compare(&doc, &copy, &visited);
    std::printf("  copy: visited %ld diffs %ld\n", visited, diffs);
    total_diffs += diffs;
    std::string text = Print(doc, round);
    Fnv tf;
    tf.Str(text);
    all.Str(text);
    std::printf("  printed: %zu bytes hash %016llx\n", text.size(),
                static_cast<unsigned long long>(tf.h));
    TiXmlDocument again;
    again.Parse(text.c_str(), nullptr, TIXML_ENCODING_UTF8);
    if (!Check(again, "reparse")) return 1;
    visited = 0;
    diffs = Compare(&doc, &again, &visited);
    std::string text2 = Print(again, round);
    bool same = text2 == text;
    std::printf("  reparsed: visited %ld diffs %ld text %s\n", visited, diffs,
                same ? "identical" : "DIFFERENT");
    total_diffs += diffs + (same ? 0 : 1);
    // The next round starts from the reparsed document.
    doc = again;
  }
  Errors();
  std::printf("rounds %d differences %ld all-text hash %016llx\n", rounds, total_diffs,
              static_cast<unsigned long long>(all.h));
  return total_diffs == 0 ? 0 : 3;
}

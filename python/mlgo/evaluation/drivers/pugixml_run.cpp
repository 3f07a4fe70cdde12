// mlgo runtime_check driver for pugixml: parse an XML document, run XPath
// queries over it, modify it (attributes computed per item, items out of stock removed) and
// write it back indented. Usage: pugixml_run FILE.xml
#include <cstdio>
#include <iostream>
#include <string>

#include "pugixml.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE.xml\n", argv[0]);
    return 2;
  }
  pugi::xml_document doc;
  pugi::xml_parse_result res =
      doc.load_file(argv[1], pugi::parse_default | pugi::parse_comments | pugi::parse_pi);
  if (!res) {
    std::fprintf(stderr, "%s at offset %ld\n", res.description(), (long)res.offset);
    return 1;
  }
  const char* numbers[] = {
      "count(//item)", "sum(//item/@stock)", "sum(//item/price)",
      "count(//item[@stock > 40])", "count(//item[contains(name, 'an')])",
      "count(//category[count(item) > 10])", "sum(//item[tags/tag = 'blue']/price)",
      "count(//description//b)", "string-length(normalize-space(string(/catalog)))"};
  for (const char* q : numbers)
    std::printf("%s = %.4f\n", q, pugi::xpath_query(q).evaluate_number(doc));
  pugi::xpath_query first_word("substring-before(concat(normalize-space(name), ' '), ' ')");
  pugi::xpath_node_set expensive = doc.select_nodes("//item[price > 90]");
  std::printf("expensive %zu:", expensive.size());
  for (const pugi::xpath_node& n : expensive)
    std::printf(" %s", first_word.evaluate_string(n.node()).c_str());
  std::printf("\n");
  long removed = 0;
  for (pugi::xml_node cat : doc.child("catalog").children("category")) {
    for (pugi::xml_node item = cat.child("item"); item;) {
      pugi::xml_node next = item.next_sibling("item");
      int stock = item.attribute("stock").as_int();
      double price = item.child("price").text().as_double();
      if (stock == 0) {
        cat.remove_child(item);
        removed++;
      } else {
        item.append_attribute("value").set_value(stock * price);
        item.child("name").text().set((std::string(item.child_value("name")) + " #" +
                                       item.attribute("id").value()).c_str());
      }
      item = next;
    }
  }
  std::printf("removed %ld\n", removed);
  doc.save(std::cout, "  ", pugi::format_indent | pugi::format_no_declaration);
  return 0;
}

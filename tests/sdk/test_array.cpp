#include <catch2/catch.hpp>

#include <embedflow/embedflow.hpp>

using namespace embedflow;

TEST_CASE("arrays of every dtype hold their values and shapes") {
  Array a = Array::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(a.dtype() == DType::f32);
  CHECK(a.shape() == Shape{2, 3});
  CHECK(a.numel() == 6);
  CHECK(a.nbytes() == 24);
  CHECK(a.data<float>()[5] == 6.0f);
  CHECK_THROWS_WITH(a.data<double>(), Catch::Contains("f32 accessed as f64"));

  CHECK(Array::scalar<std::int64_t>(-7).item<std::int64_t>() == -7);
  CHECK(Array::scalar<std::int32_t>(5).as_double(0) == 5.0);
  CHECK(Array::scalar<std::uint8_t>(200).as_int(0) == 200);
  CHECK(Array::scalar<double>(2.5).item<double>() == 2.5);
  Array flags = Array::zeros(DType::boolean, {3});
  flags.mutable_raw();
  static_cast<std::uint8_t*>(flags.mutable_raw())[1] = 1;
  CHECK(flags.as_int(1) == 1);
  CHECK(flags.as_int(0) == 0);
  CHECK(flags.describe() == "bool[3]");
  CHECK_THROWS(Array::from_vector<float>({4}, {1, 2, 3}));
}

TEST_CASE("slices and rows share the buffer") {
  Array a = Array::from_vector<std::int32_t>({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Array s = a.slice(1, 3);
  CHECK(s.shape() == Shape{2, 2});
  CHECK(s.data<std::int32_t>()[0] == 2);
  CHECK(s.data<std::int32_t>() == a.data<std::int32_t>() + 2);  // no copy
  Array r = a.row(3);
  CHECK(r.shape() == Shape{2});
  CHECK(r.data<std::int32_t>()[1] == 7);
  CHECK_THROWS(a.slice(3, 5));
  CHECK(a.reshape({8}).shape() == Shape{8});
  CHECK_THROWS(a.reshape({3}));
}

TEST_CASE("wrapped memory keeps its owner alive") {
  auto owner = std::make_shared<std::vector<double>>(std::vector<double>{1.5, 2.5});
  std::weak_ptr<std::vector<double>> watch = owner;
  Array a = Array::wrap(DType::f64, {2}, owner->data(), owner);
  owner.reset();
  REQUIRE_FALSE(watch.expired());
  CHECK(a.data<double>()[1] == 2.5);
  a = Array();
  CHECK(watch.expired());
}

TEST_CASE("stack and concat build batches, strings included") {
  Array x = Array::from_vector<float>({2}, {1, 2});
  Array y = Array::from_vector<float>({2}, {3, 4});
  Array s = Array::stack({x, y});
  CHECK(s.shape() == Shape{2, 2});
  CHECK(s.data<float>()[2] == 3.0f);
  Array c = Array::concat({s, s.slice(0, 1)});
  CHECK(c.shape() == Shape{3, 2});
  CHECK(c.data<float>()[5] == 2.0f);
  CHECK_THROWS(Array::stack({x, Array::from_vector<float>({3}, {1, 2, 3})}));

  Array names = Array::stack({Array::string_scalar("a"), Array::string_scalar("bc")});
  CHECK(names.shape() == Shape{2});
  CHECK(names.string_at(1) == "bc");
  Array col = Array::strings({"p", "q", "r", "s"});
  Array tail = col.slice(2, 4);
  CHECK(tail.string_at(0) == "r");
  CHECK(tail.row(1).string_at(0) == "s");
  CHECK(Array::concat({tail, col.slice(0, 1)}).string_at(2) == "p");
}

TEST_CASE("records are ordered named fields with clear errors") {
  Record r;
  r.set("image", Array::zeros(DType::u8, {4, 28, 28})).set("label", Array::zeros(DType::i64, {4}));
  CHECK(r.size() == 2);
  CHECK(r.batch_size() == 4);
  CHECK(r.describe() == "{image: u8[4,28,28], label: i64[4]}");
  CHECK_THROWS_WITH(r.get("embedding"), Catch::Contains("no field 'embedding'") && Catch::Contains("image"));
  r.set("label", Array::zeros(DType::i64, {3}));
  CHECK_THROWS_WITH(r.batch_size(), Catch::Contains("disagree"));
  CHECK(r.erase("label"));
  CHECK_FALSE(r.has("label"));
}

TEST_CASE("array equality compares dtype, shape and contents") {
  Array a = Array::from_vector<double>({2}, {1, 2});
  CHECK(a.equals(Array::from_vector<double>({2}, {1, 2})));
  CHECK_FALSE(a.equals(Array::from_vector<double>({2}, {1, 3})));
  CHECK_FALSE(a.equals(Array::from_vector<float>({2}, {1, 2})));
  CHECK(Array::strings({"x"}).equals(Array::strings({"x"})));
}

TEST_CASE("seeds are stable and distinct per key") {
  CHECK(derive_seed(7, "pairs") == derive_seed(7, "pairs"));
  CHECK(derive_seed(7, "pairs") != derive_seed(8, "pairs"));
  CHECK(derive_seed(7, "pairs") != derive_seed(7, "pair"));
  CHECK(derive_seed(7, std::uint64_t{1}) != derive_seed(7, std::uint64_t{2}));
  // FNV-1a of "a" is a published constant: the hash must not depend on the platform.
  CHECK(stable_hash("a") == 0xaf63dc4c8601ec8cULL);
}

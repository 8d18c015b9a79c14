// Comparison helpers shared by the Boost.Test suites.
#pragma once

#include <cmath>
#include <string>

#include <boost/test/unit_test.hpp>

#include "policy/tensor.hpp"

namespace mambarl::test {

// Normwise relative error ||a - b|| / ||b|| (plugin/DESIGN.md "Numerics and tolerances"); NaN never passes.
template <typename DA, typename DB>
double rel_error(const Eigen::MatrixBase<DA>& a, const Eigen::MatrixBase<DB>& b) {
  const double num = (a.template cast<double>() - b.template cast<double>()).norm();
  const double den = b.template cast<double>().norm();
  if (!std::isfinite(num) || !std::isfinite(den)) return INFINITY;
  return den > 0 ? num / den : num;
}

// Elementwise |a-b| <= atol + rtol*|b|; returns the index of the first failure or -1.
template <typename DA, typename DB>
Eigen::Index first_mismatch(const Eigen::MatrixBase<DA>& a, const Eigen::MatrixBase<DB>& b,
                            double rtol, double atol) {
  for (Eigen::Index i = 0; i < a.size(); ++i) {
    const double x = static_cast<double>(a.derived().data()[i]);
    const double y = static_cast<double>(b.derived().data()[i]);
    if (!(std::abs(x - y) <= atol + rtol * std::abs(y))) return i;
  }
  return -1;
}

}  // namespace mambarl::test

// Both checks at once, with a message naming the tensor.
#define MAMBARL_CHECK_CLOSE_REL(what, a, b, rel_tol, elem_rtol, elem_atol)                       \
  do {                                                                                          \
    const double mambarl_re_ = ::mambarl::test::rel_error((a), (b));                            \
    BOOST_CHECK_MESSAGE(mambarl_re_ <= (rel_tol),                                               \
                        what << ": normwise rel error " << mambarl_re_ << " > " << (rel_tol));  \
    const auto mambarl_i_ = ::mambarl::test::first_mismatch((a), (b), (elem_rtol), (elem_atol)); \
    BOOST_CHECK_MESSAGE(mambarl_i_ < 0, what << ": element " << mambarl_i_ << " differs: "      \
                                             << (mambarl_i_ >= 0 ? (a).derived().data()[mambarl_i_ < 0 ? 0 : mambarl_i_] : 0) \
                                             << " vs "                                          \
                                             << (mambarl_i_ >= 0 ? (b).derived().data()[mambarl_i_ < 0 ? 0 : mambarl_i_] : 0)); \
  } while (0)
